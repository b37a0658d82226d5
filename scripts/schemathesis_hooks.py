"""Schemathesis hooks for scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

Generated requests whose head (request line and fields) comes near a connection's memory are
not sent. libmicrohttpd refuses a head larger than that memory itself (414 or 431, what
openapi.yaml says of every operation), but a head within about 1.2 KiB below it can leave no room
for the parsed query arguments or for the answer's head, and libmicrohttpd 0.9.75 then closes the
connection without an answer (docs/operations.md, "Request heads near the connection memory").
That band is the HTTP library's, not the API's, and HTTPServerTests cover what the server does
with large heads; schemathesis checks the API with heads up to HEAD_LIMIT bytes.
"""

from urllib.parse import quote, urlencode

import schemathesis

# A connection's memory is 14 KiB (HTTPServer.Configuration.connectionMemoryLimit); the band
# where an answer can be lost starts about 1.2 KiB below it.
HEAD_LIMIT = 11 * 1024


def head_size(case) -> int:
    """The request line and fields of `case` as requests would send them, plus a margin for the
    fields the client adds itself (Host, User-Agent, Accept, Authorization and the like)."""
    path = case.formatted_path
    query = urlencode(case.query or {}, doseq=True, quote_via=quote)
    line = len(case.method) + len(quote(path, safe="/%:@!$&'()*+,;=")) + len(query) + 16
    fields = sum(len(str(name)) + len(str(value)) + 4 for name, value in (case.headers or {}).items())
    cookies = sum(len(str(name)) + len(str(value)) + 2 for name, value in (case.cookies or {}).items())
    return line + fields + cookies + 512


@schemathesis.hook
def filter_case(context, case) -> bool:
    return head_size(case) <= HEAD_LIMIT


@schemathesis.serializer("application/secevent+jwt")
def security_event_token(context, value) -> bytes:
    """A pushed security event token (RFC 8935) is the token's text as the body; schemathesis
    has no serializer of its own for the media type. Generated values are strings (the schema's);
    anything else is sent as its text."""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")
