#!/usr/bin/env bash
# The whole mobile flow against `make dev`, with curl, as an app and its browser do it. The README's
# quick start shows these lines; `make dev` prints them; DevWalkthroughTests runs this file.
set -euo pipefail
# --- walkthrough ---
TG=${TG:-http://127.0.0.1:8080}
json() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
APP="client_id=dev-app&redirect_uri=com.example.dev:/oauth"
# 1. The app makes a PKCE pair and asks TokenGate where to send the browser.
verifier=$(openssl rand -hex 32)
challenge=$(printf %s "$verifier" | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=')
login=$(curl -sf -H 'Accept: application/json' \
  "$TG/auth/login?$APP&response_type=code&state=s1&code_challenge=$challenge&code_challenge_method=S256" | json authorization_url)
# 2. The browser signs in at the development provider (its form posts sub=<user>)...
callback=$(curl -s -o /dev/null -w '%{redirect_url}' -d sub=alice "$login")
# 3. ...and TokenGate's callback sends it back to the app with a one-time code.
code=$(curl -s -o /dev/null -w '%{redirect_url}' "$callback" | sed -n 's/.*[?&]code=\([^&]*\).*/\1/p')
# 4. The app redeems the code with its verifier: TokenGate's own tokens.
tokens=$(curl -sf "$TG/auth/token" -d grant_type=authorization_code -d "code=$code" \
  -d "code_verifier=$verifier" -d redirect_uri=com.example.dev:/oauth -d client_id=dev-app)
access=$(echo "$tokens" | json access_token); refresh=$(echo "$tokens" | json refresh_token)
# 5. Who is signed in, and a call to the API through TokenGate (it adds the provider's token).
curl -sf "$TG/auth/me" -H "Authorization: Bearer $access"; echo
curl -sf "$TG/api/graph/me" -H "Authorization: Bearer $access"; echo
# 6. A page of messages: its @odata.nextLink is TokenGate's URL (rewrite_links), so the app follows it as it is.
next=$(curl -sf "$TG/api/graph/me/messages" -H "Authorization: Bearer $access" | json @odata.nextLink); echo "$next"
curl -sf "$next" -H "Authorization: Bearer $access"; echo
# 7. New tokens with the refresh token (the old one is spent).
access=$(curl -sf "$TG/auth/token" -d grant_type=refresh_token -d "refresh_token=$refresh" -d client_id=dev-app | json access_token)
# 8. Lost Keychain? The app kept a transfer code and its verifier where they survive (README,
#    "Transfer codes"); a fresh install redeems it once: the same accounts, no sign-in.
keep=$(openssl rand -hex 32)
kept=$(printf %s "$keep" | openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '=')
transfer=$(curl -sf -X POST "$TG/auth/transfer" -H "Authorization: Bearer $access" \
  -d "code_challenge=$kept" -d code_challenge_method=S256 | json transfer_code)
old=$access
access=$(curl -sf "$TG/auth/token" -d grant_type=urn:tokengate:params:oauth:grant-type:transfer-code \
  -d "transfer_code=$transfer" -d "code_verifier=$keep" -d client_id=dev-app | json access_token)
curl -s -o /dev/null -w 'old device after transfer: %{http_code}\n' "$TG/auth/me" -H "Authorization: Bearer $old"
# 9. Log out: the session ends; its token no longer works.
curl -sf -X POST "$TG/auth/logout" -H "Authorization: Bearer $access"; echo
curl -s -o /dev/null -w 'after logout: %{http_code}\n' "$TG/auth/me" -H "Authorization: Bearer $access"
