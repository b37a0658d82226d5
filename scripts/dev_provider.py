"""The development OpenID provider of `make dev`: oidc-provider-mock (PyPI, the one the tests use),
plus the one thing it lacks to show back-channel logout (OpenID Connect Back-Channel Logout 1.0).

    python3 scripts/dev_provider.py HOST PORT

`POST /dev/logout-token` with `sub` (and `aud`, the client id; `sid` when wanted) answers a logout
token signed with the provider's own key, as the provider would POST it to a client's
`backchannel_logout_uri` when that user signs out there (scripts/backchannel-logout.sh sends it to
TokenGate with curl). Development only: anyone who reaches this port can sign users out.
"""

import logging
import os
import sys
import time
import uuid

import flask
import uvicorn
from authlib import jose

import oidc_provider_mock

EVENT = "http://schemas.openid.net/event/backchannel-logout"


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
    app = oidc_provider_mock.app()

    @app.post("/dev/logout-token")
    def logout_token():
        sub = flask.request.form.get("sub")
        sid = flask.request.form.get("sid")
        if not sub and not sid:
            return flask.jsonify({"error": "invalid_request", "error_description": "sub or sid is required"}), 400
        now = int(time.time())
        claims = {
            "iss": flask.request.host_url.rstrip("/"),
            "aud": flask.request.form.get("aud", "tokengate-dev"),
            "iat": now,
            "exp": now + 120,
            "jti": uuid.uuid4().hex,
            "events": {EVENT: {}},
        }
        if sub:
            claims["sub"] = sub
        if sid:
            claims["sid"] = sid
        key = flask.g.oidc_provider_mock_storage.jwk
        header = {"alg": "RS256", "typ": "logout+jwt", "kid": key.as_dict()["kid"]}
        token = jose.jwt.encode(header, claims, key)
        return flask.Response(token, mimetype="text/plain")

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    uvicorn.run(app, interface="wsgi", host=host, port=port, log_config=None)


if __name__ == "__main__":
    main()
