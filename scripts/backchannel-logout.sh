#!/usr/bin/env bash
# Back-channel logout against `make dev`, with curl (README, "Back-channel logout"): alice signs in
# as in scripts/walkthrough.sh, then signs out at the provider, which sends TokenGate a signed
# logout token; her session ends on every instance. DevWalkthroughTests runs this file.
#
#   TG=http://127.0.0.1:8080 IDP=http://127.0.0.1:8081 bash scripts/backchannel-logout.sh
set -euo pipefail
TG=${TG:-http://127.0.0.1:8080}
IDP=${IDP:-http://127.0.0.1:8081}
json() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# 1. alice signs in through the app (the walkthrough's steps 1–4, in short).
verifier=$(openssl rand -hex 32)
challenge=$(printf %s "$verifier" | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=')
login=$(curl -sf -H 'Accept: application/json' "$TG/auth/login?client_id=dev-app&redirect_uri=com.example.dev:/oauth&response_type=code&state=s1&code_challenge=$challenge&code_challenge_method=S256" | json authorization_url)
callback=$(curl -s -o /dev/null -w '%{redirect_url}' -d sub=alice "$login")
code=$(curl -s -o /dev/null -w '%{redirect_url}' "$callback" | sed -n 's/.*[?&]code=\([^&]*\).*/\1/p')
access=$(curl -sf "$TG/auth/token" -d grant_type=authorization_code -d "code=$code" -d "code_verifier=$verifier" \
  -d redirect_uri=com.example.dev:/oauth -d client_id=dev-app | json access_token)
curl -s -o /dev/null -w 'signed in: %{http_code}\n' "$TG/auth/me" -H "Authorization: Bearer $access"
# 2. alice signs out at the provider. It signs a logout token for her (iss, aud = TokenGate's
#    client id, iat, jti, sub, the back-channel logout event; the development provider's
#    /dev/logout-token route stands in for its sign-out page)...
logout_token=$(curl -sf "$IDP/dev/logout-token" -d sub=alice -d aud=tokengate-dev)
# 3. ...and POSTs it to TokenGate's back-channel logout URI for this provider (register
#    <public_base_url>/auth/backchannel-logout/<provider> there; tokengate check-config prints it).
curl -s -o /dev/null -w 'back-channel logout: %{http_code}\n' "$TG/auth/backchannel-logout/dev" --data-urlencode "logout_token=$logout_token"
# 4. Every session of alice has ended (the account and its grant are gone, the refresh token revoked).
curl -s -o /dev/null -w 'after back-channel logout: %{http_code}\n' "$TG/auth/me" -H "Authorization: Bearer $access"
# 5. The same token again is a replay, refused on every instance.
curl -s -w '\n' "$TG/auth/backchannel-logout/dev" --data-urlencode "logout_token=$logout_token"
