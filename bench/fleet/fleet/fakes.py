"""The fleet's fake OpenID provider and fake API, in one process (they share the provider's tokens).

    python3 -m fleet.fakes PROVIDER_PORT API_PORT [--access-ttl SECONDS] [--client-secret SECRET]

The provider (http://127.0.0.1:PROVIDER_PORT):
- discovery, JWKS (one RSA key), RS256 ID tokens with iss, aud, azp, sub, iat, exp, nonce, email, name;
- GET /authorize auto-approves the user named by `login_hint` (else `fleet-user`) and redirects
  to `redirect_uri` with a code (PKCE S256 checked at the token endpoint);
- POST /token: `authorization_code` and `refresh_token`, client_secret_basic or _post. Refresh
  tokens ROTATE: each refresh spends the token presented and returns a new one. A spent token
  presented again is a REUSE: `invalid_grant`, the reuse is recorded (/stats `reuses`,
  `reuse_log`) and the token's whole family is revoked, as strict providers do;
- POST /revoke (RFC 7009) revokes a refresh token's family and its access tokens;
- GET /userinfo; GET /stats (JSON counters, below); POST /control (JSON) injects faults:
  `{"token_delay_ms": 200}` delays every token request, `{"fail_token_requests": 5,
  "fail_status": 503}` answers the next 5 token requests with that status, `{"client_secret": "x"}`
  changes the secret the provider accepts (TokenGate's expires: 401 `invalid_client`), and
  `{"refused_client_status": 400}` answers a refused client at /token with that status and an
  empty body instead, as glewlwyd 2.7 does (/revoke still answers 401).

The API (http://127.0.0.1:API_PORT) accepts the provider's live access tokens only (it looks them
up in the provider's memory, as an introspection call would):
- GET /items, GET /items/<anything>: 200 `{"sub": …}`; POST|PUT /items: 201 with the body's length;
  `?delay_ms=N` answers N ms later (requests in flight when an instance drains);
- `?invalidate=<id>` (any method): the first request with that id finds its token revoked, as
  when the provider revoked it: the token dies and the answer is 401 `invalid_token`, which
  makes TokenGate refresh the upstream token and retry once (idempotent methods); later requests
  with the same id (that retry) are served;
- a dead token (unknown, expired or revoked) gets 401 with `WWW-Authenticate: Bearer
  error="invalid_token"`, counted as `api.unauthorized_unexpected` unless a forced one.
"""

import argparse
import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_uint(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class ProviderState:
    """Everything the provider remembers, under one lock."""

    def __init__(self, issuer: str, client_id: str, client_secret: str, access_ttl: int, refresh_ttl: int):
        self.issuer, self.client_id, self.client_secret = issuer, client_id, client_secret
        self.access_ttl, self.refresh_ttl = access_ttl, refresh_ttl
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "fleet-" + secrets.token_hex(4)
        self.lock = threading.Lock()
        self.codes = {}  # code -> dict(sub, nonce, redirect_uri, challenge, scope, expires)
        self.refresh = {}  # token -> dict(sub, family, state: live|spent|revoked, issued)
        self.families = {}  # family -> dict(sub, live: token or None, revoked: bool)
        self.access = {}  # token -> dict(sub, family, expires, revoked)
        self.invalidations = set()  # ids of ?invalidate=<id> already acted on
        self.faults = {"token_delay_ms": 0, "fail_token_requests": 0, "fail_status": 503}
        self.counts = {
            "authorize": 0, "grants": {"authorization_code": 0, "refresh_token": 0, "other": 0},
            "refreshes": 0, "reuses": 0, "revoked_refresh_presented": 0, "unknown_refresh_presented": 0,
            "code_reuses": 0, "pkce_failures": 0, "invalid_client": 0, "invalid_client_refresh": 0, "revocations": 0, "userinfo": 0,
            "injected_failures": 0, "access_tokens_issued": 0,
        }
        self.reuse_log = []  # the first reuses: sub, family, seconds since the token was spent
        self.history = {}  # sub -> the last 80 events (t, what, token tail, detail), for failure reports
        self.api = {"calls": 0, "ok": 0, "forced_invalidations": 0, "unauthorized_unexpected": 0, "by_method": {}}

    # The JWS of an ID token.
    def sign(self, claims: dict) -> str:
        header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": self.kid}).encode())
        payload = b64url(json.dumps(claims).encode())
        signature = self.key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{payload}.{b64url(signature)}"

    def jwks(self) -> dict:
        numbers = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                          "n": b64url_uint(numbers.n), "e": b64url_uint(numbers.e)}]}

    def issue(self, sub: str, family: str, nonce, scope: str) -> dict:
        """New access and refresh tokens (and an ID token) for a family; caller holds the lock."""
        now = int(time.time())
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(32)
        self.access[access] = {"sub": sub, "family": family, "expires": now + self.access_ttl, "revoked": False}
        self.refresh[refresh] = {"sub": sub, "family": family, "state": "live", "issued": time.time(), "spent_at": None}
        self.families[family]["live"] = refresh
        self.counts["access_tokens_issued"] += 1
        self.note(sub, "issued", access, f"family {family[-4:]} scope {scope}")
        claims = {"iss": self.issuer, "sub": sub, "aud": self.client_id, "azp": self.client_id, "iat": now,
                  "exp": now + 300, "email": f"{sub}@fleet.example", "name": sub}
        if nonce:
            claims["nonce"] = nonce
        return {"access_token": access, "token_type": "Bearer", "expires_in": self.access_ttl,
                "refresh_token": refresh, "id_token": self.sign(claims), "scope": scope}

    def note(self, sub: str, what: str, token: str = "", detail: str = ""):
        """Caller holds the lock."""
        events = self.history.setdefault(sub, [])
        events.append((round(time.time(), 3), what, token[-6:], detail))
        del events[:-80]

    def revoke_family(self, family: str):
        entry = self.families.get(family)
        if entry is None or entry["revoked"]:
            return
        entry["revoked"] = True
        self.note(entry["sub"], "family revoked", "", family[-4:])
        if entry["live"]:
            self.refresh[entry["live"]]["state"] = "revoked"
            entry["live"] = None
        for token in self.access.values():
            if token["family"] == family:
                token["revoked"] = True

    def prune(self):
        """Forgets access tokens expired for a minute (refresh tokens stay: reuse is recognised forever)."""
        cutoff = time.time() - 60
        with self.lock:
            for token in [t for t, v in self.access.items() if v["expires"] < cutoff]:
                del self.access[token]

    def stats(self) -> dict:
        with self.lock:
            live = sum(1 for f in self.families.values() if f["live"] and not f["revoked"])
            return dict(self.counts, grants=dict(self.counts["grants"]), live_grants=live,
                        live_subjects=sorted({f["sub"] for f in self.families.values() if f["live"] and not f["revoked"]}),
                        families=len(self.families), reuse_log=list(self.reuse_log), api=json.loads(json.dumps(self.api)),
                        faults=dict(self.faults))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: ProviderState = None  # set per server class

    def log_message(self, *args):
        pass

    def reply(self, status: int, body=None, headers=(), raw: bytes = None, content_type="application/json"):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        self.send_response(status)
        if data or status not in (204, 302):
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def form(self) -> dict:
        return dict(urllib.parse.parse_qsl(self.body().decode()))

    def query(self) -> dict:
        return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))


class ProviderHandler(Handler):
    def do_GET(self):
        s = self.state
        path = urllib.parse.urlsplit(self.path).path
        if path == "/.well-known/openid-configuration":
            i = s.issuer
            return self.reply(200, {
                "issuer": i, "authorization_endpoint": i + "/authorize", "token_endpoint": i + "/token",
                "jwks_uri": i + "/jwks", "userinfo_endpoint": i + "/userinfo", "revocation_endpoint": i + "/revoke",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"], "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "scopes_supported": ["openid", "profile", "email", "offline_access", "api"],
                "authorization_response_iss_parameter_supported": True,
            })
        if path == "/jwks":
            return self.reply(200, s.jwks())
        if path == "/authorize":
            return self.authorize(self.query())
        if path == "/userinfo":
            return self.userinfo()
        if path == "/stats":
            return self.reply(200, s.stats())
        if path == "/history":
            with s.lock:
                return self.reply(200, s.history.get(self.query().get("sub", ""), []))
        if path == "/healthz":
            return self.reply(200, {"status": "ok"})
        self.reply(404, {"error": "not_found"})

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/token":
            return self.token()
        if path == "/revoke":
            return self.revoke()
        if path == "/control":
            changes = json.loads(self.body() or b"{}")
            with self.state.lock:
                # The secret the provider accepts (an expired or rotated one refuses TokenGate).
                if "client_secret" in changes:
                    self.state.client_secret = changes.pop("client_secret")
                self.state.faults.update(changes)
                faults = dict(self.state.faults)
            return self.reply(200, faults)
        self.reply(404, {"error": "not_found"})

    def authorize(self, q: dict):
        s = self.state
        if q.get("client_id") != s.client_id or not q.get("redirect_uri"):
            return self.reply(400, {"error": "invalid_request", "error_description": "unknown client or no redirect_uri"})
        sub = q.get("login_hint") or "fleet-user"
        code = "code-" + secrets.token_urlsafe(24)
        with s.lock:
            s.counts["authorize"] += 1
            s.codes[code] = {"sub": sub, "nonce": q.get("nonce"), "redirect_uri": q["redirect_uri"],
                             "challenge": q.get("code_challenge"), "scope": q.get("scope", "openid"),
                             "expires": time.time() + 120}
        back = {"code": code, "iss": s.issuer}
        if "state" in q:
            back["state"] = q["state"]
        separator = "&" if "?" in q["redirect_uri"] else "?"
        self.reply(302, headers=[("Location", q["redirect_uri"] + separator + urllib.parse.urlencode(back))])

    def client_authenticated(self, form: dict) -> bool:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                return False
            user, password = urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
        else:
            user, password = form.get("client_id"), form.get("client_secret")
        return user == self.state.client_id and password == self.state.client_secret

    def token(self):
        s = self.state
        form = self.form()
        with s.lock:
            delay = s.faults.get("token_delay_ms", 0)
            fail = s.faults.get("fail_token_requests", 0) > 0
            if fail:
                s.faults["fail_token_requests"] -= 1
                s.counts["injected_failures"] += 1
        if delay:
            time.sleep(delay / 1000)
        if fail:
            return self.reply(int(s.faults.get("fail_status", 503)), {"error": "temporarily_unavailable"})
        if not self.client_authenticated(form):
            with s.lock:
                s.counts["invalid_client"] += 1
                if form.get("grant_type") == "refresh_token":
                    s.counts["invalid_client_refresh"] += 1
                empty = s.faults.get("refused_client_status")
            if empty:
                # glewlwyd 2.7: a wrong secret at /token is 400 and nothing else (/revoke says 401).
                return self.reply(int(empty), raw=b"")
            return self.reply(401, {"error": "invalid_client"}, [("WWW-Authenticate", 'Basic realm="fleet"')])
        grant = form.get("grant_type")
        with s.lock:
            s.counts["grants"][grant if grant in s.counts["grants"] else "other"] += 1
            if grant == "authorization_code":
                return self.code_grant(form)
            if grant == "refresh_token":
                return self.refresh_grant(form)
        self.reply(400, {"error": "unsupported_grant_type"})

    def code_grant(self, form: dict):
        """Under the lock."""
        s = self.state
        entry = s.codes.pop(form.get("code", ""), None)
        if entry is None or entry["expires"] < time.time():
            s.counts["code_reuses"] += 1
            return self.reply(400, {"error": "invalid_grant", "error_description": "unknown or used code"})
        if entry["redirect_uri"] != form.get("redirect_uri"):
            return self.reply(400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"})
        if entry["challenge"]:
            verifier = form.get("code_verifier", "")
            if b64url(hashlib.sha256(verifier.encode()).digest()) != entry["challenge"]:
                s.counts["pkce_failures"] += 1
                return self.reply(400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
        family = "fam-" + secrets.token_hex(8)
        s.families[family] = {"sub": entry["sub"], "live": None, "revoked": False}
        self.reply(200, s.issue(entry["sub"], family, entry["nonce"], entry["scope"]))

    def refresh_grant(self, form: dict):
        """Under the lock."""
        s = self.state
        token = form.get("refresh_token", "")
        entry = s.refresh.get(token)
        if entry is None:
            s.counts["unknown_refresh_presented"] += 1
            return self.reply(400, {"error": "invalid_grant", "error_description": "unknown refresh token"})
        if entry["state"] == "spent":
            s.counts["reuses"] += 1
            if len(s.reuse_log) < 50:
                s.reuse_log.append({"sub": entry["sub"], "family": entry["family"],
                                    "seconds_after_spent": round(time.time() - entry["spent_at"], 3)})
            s.revoke_family(entry["family"])
            return self.reply(400, {"error": "invalid_grant", "error_description": "refresh token reused; grant revoked"})
        if entry["state"] == "revoked":
            s.counts["revoked_refresh_presented"] += 1
            return self.reply(400, {"error": "invalid_grant", "error_description": "refresh token revoked"})
        entry["state"], entry["spent_at"] = "spent", time.time()
        s.counts["refreshes"] += 1
        self.reply(200, s.issue(entry["sub"], entry["family"], None, form.get("scope", "openid")))

    def revoke(self):
        s = self.state
        form = self.form()
        if not self.client_authenticated(form):
            return self.reply(401, {"error": "invalid_client"})
        with s.lock:
            s.counts["revocations"] += 1
            token = form.get("token", "")
            if token in s.refresh:
                s.revoke_family(s.refresh[token]["family"])
            elif token in s.access:
                s.access[token]["revoked"] = True
                s.note(s.access[token]["sub"], "access token revoked", token)
        self.reply(200, raw=b"")

    def userinfo(self):
        s = self.state
        auth = self.headers.get("Authorization", "")
        with s.lock:
            s.counts["userinfo"] += 1
            entry = s.access.get(auth[7:]) if auth.startswith("Bearer ") else None
            alive = entry and not entry["revoked"] and entry["expires"] > time.time()
        if not alive:
            return self.reply(401, {"error": "invalid_token"}, [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        self.reply(200, {"sub": entry["sub"], "email": f"{entry['sub']}@fleet.example", "name": entry["sub"]})


class APIHandler(Handler):
    def serve(self):
        s = self.state
        url = urllib.parse.urlsplit(self.path)
        body = self.body()
        query = dict(urllib.parse.parse_qsl(url.query))
        invalidate = query.get("invalidate")
        if query.get("delay_ms", "").isdigit():
            time.sleep(min(int(query["delay_ms"]), 30000) / 1000)
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        with s.lock:
            s.api["calls"] += 1
            s.api["by_method"][self.command] = s.api["by_method"].get(self.command, 0) + 1
            entry = s.access.get(token)
            alive = entry is not None and not entry["revoked"] and entry["expires"] > time.time()
            reason = "unknown" if entry is None else "revoked" if entry["revoked"] else "expired" if not alive else None
            forced = False
            if entry is not None:
                s.note(entry["sub"], f"api {self.command}", token, f"{reason or 'alive'}{' invalidate' if invalidate else ''}")
            if alive and invalidate and invalidate not in s.invalidations:
                s.invalidations.add(invalidate)
                entry["revoked"], alive, forced = True, False, True
                s.api["forced_invalidations"] += 1
            elif not alive:
                s.api["unauthorized_unexpected"] += 1
                reasons = s.api.setdefault("unexpected_reasons", {})
                reasons[reason] = reasons.get(reason, 0) + 1
            else:
                s.api["ok"] += 1
        if not alive:
            return self.reply(401, {"error": {"code": "InvalidAuthenticationToken", "forced": forced, "reason": reason,
                                              "sub": entry and entry["sub"]}},
                              [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        if not url.path.startswith("/items"):
            return self.reply(404, {"error": {"code": "ResourceNotFound"}})
        if self.command in ("POST", "PUT"):
            return self.reply(201, {"sub": entry["sub"], "received": len(body)})
        self.reply(200, {"sub": entry["sub"], "path": url.path, "items": [1, 2, 3]})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = serve


def serve(handler: type, state: ProviderState, port: int) -> ThreadingHTTPServer:
    bound = type(handler.__name__, (handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", port), bound)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser(description="The fleet's fake OpenID provider and API.")
    parser.add_argument("provider_port", type=int)
    parser.add_argument("api_port", type=int)
    parser.add_argument("--access-ttl", type=int, default=20, help="upstream access-token lifetime, seconds")
    parser.add_argument("--refresh-ttl", type=int, default=86400)
    parser.add_argument("--client-id", default="tokengate")
    parser.add_argument("--client-secret", default="fleet-secret")
    args = parser.parse_args()
    state = ProviderState(f"http://127.0.0.1:{args.provider_port}", args.client_id, args.client_secret,
                          args.access_ttl, args.refresh_ttl)
    serve(ProviderHandler, state, args.provider_port)
    serve(APIHandler, state, args.api_port)
    print(f"fakes: provider http://127.0.0.1:{args.provider_port} api http://127.0.0.1:{args.api_port}", flush=True)
    while True:
        time.sleep(30)
        state.prune()


if __name__ == "__main__":
    main()
