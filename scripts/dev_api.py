"""A small Graph-shaped API for `make dev`: it trusts the development provider's access tokens.

    python3 scripts/dev_api.py PORT PROVIDER_ISSUER

GET /me answers the signed-in user (from the provider's userinfo endpoint, which also checks the
token); GET /me/messages answers a page with an absolute @odata.nextLink to this API, as Graph
does, and its second page ($skip=1) an @odata.deltaLink (TokenGate rewrites both: rewrite_links).
A token the provider does not know gets 401 with WWW-Authenticate: Bearer error="invalid_token".
"""
import json, sys, urllib.error, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, issuer = int(sys.argv[1]), sys.argv[2].rstrip("/")
with urllib.request.urlopen(issuer + "/.well-known/openid-configuration", timeout=5) as answer:
    userinfo_endpoint = json.load(answer)["userinfo_endpoint"]


class API(BaseHTTPRequestHandler):
    def reply(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        request = urllib.request.Request(userinfo_endpoint, headers={"Authorization": self.headers.get("Authorization", "")})
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                user = json.load(answer)
        except urllib.error.HTTPError:
            return self.reply(401, {"error": {"code": "InvalidAuthenticationToken", "message": "Access token is invalid."}},
                              [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        path = self.path.split("?")[0]
        if path == "/me":
            return self.reply(200, {"id": user["sub"], "displayName": user.get("name", user["sub"]), "mail": user.get("email")})
        if path == "/me/messages" and "$skip=1" in self.path:
            return self.reply(200, {"value": [{"id": "2", "subject": "Paging through TokenGate"}],
                                    "@odata.deltaLink": f"http://127.0.0.1:{port}/me/messages/delta?$deltatoken=1"})
        if path == "/me/messages":
            return self.reply(200, {"value": [{"id": "1", "subject": "Welcome to TokenGate"}],
                                    "@odata.nextLink": f"http://127.0.0.1:{port}/me/messages?$skip=1"})
        self.reply(404, {"error": {"code": "ResourceNotFound", "message": f"No resource at {path}."}})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", port), API).serve_forever()
