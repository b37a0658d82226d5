#!/usr/bin/env bash
# DPoP-bound tokens (RFC 9449) against `make dev`, with curl: the app's key signs a proof for
# every request; TokenGate binds the tokens to that key and refuses them without its proof.
# Proofs come from scripts/dpop_proof.py (python3-cryptography). DevWalkthroughTests runs this file.
set -euo pipefail
cd "$(dirname "$0")/.."
TG=${TG:-http://127.0.0.1:8080}
key=$(mktemp -u /tmp/tokengate-dpop-key.XXXXXX)
trap 'rm -f "$key"' EXIT
proof() { python3 scripts/dpop_proof.py "$key" "$@"; }
# 1. Log in; the code redemption carries a proof of the app's key (made on first use).
tokens=$(python3 scripts/mock_login.py "$TG" dev-app com.example.dev:/oauth alice "$key")
access=$(echo "$tokens" | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')
refresh=$(echo "$tokens" | python3 -c 'import json, sys; print(json.load(sys.stdin)["refresh_token"])')
echo "token_type: $(echo "$tokens" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token_type"])')"
# 2. Each call: Authorization: DPoP <token> and a fresh proof for its method and URL.
curl -sf "$TG/auth/me" -H "Authorization: DPoP $access" -H "DPoP: $(proof GET "$TG/auth/me" "$access")"; echo
curl -sf "$TG/api/graph/me" -H "Authorization: DPoP $access" -H "DPoP: $(proof GET "$TG/api/graph/me" "$access")"; echo
# 3. The same token as a bearer token, or without a proof: refused.
curl -s -o /dev/null -w 'as bearer: %{http_code}\n' "$TG/auth/me" -H "Authorization: Bearer $access"
curl -s -o /dev/null -w 'without a proof: %{http_code}\n' "$TG/auth/me" -H "Authorization: DPoP $access"
# 4. The refresh token is bound too: it refreshes only with a proof of the same key.
curl -s -o /dev/null -w 'refresh without a proof: %{http_code}\n' "$TG/auth/token" \
  -d grant_type=refresh_token -d "refresh_token=$refresh" -d client_id=dev-app
curl -s -o /dev/null -w 'refresh with the proof: %{http_code}\n' "$TG/auth/token" -H "DPoP: $(proof POST "$TG/auth/token")" \
  -d grant_type=refresh_token -d "refresh_token=$refresh" -d client_id=dev-app
