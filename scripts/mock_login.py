"""One real login through TokenGate and oidc-provider-mock, as an app and its browser do it.

    python3 scripts/mock_login.py TOKENGATE_BASE_URL CLIENT_ID REDIRECT_URI USER [DPOP_KEY_FILE]

Prints TokenGate's token answer (JSON). The provider's login form is a POST of sub=<user>. With
DPOP_KEY_FILE, the code redemption carries a DPoP proof of that key (scripts/dpop_proof.py), so
an app configured with `dpop` gets tokens bound to it.
"""
import base64, hashlib, json, os, secrets, subprocess, sys, urllib.parse
import requests

base, client_id, redirect_uri, user = sys.argv[1:5]
dpop_key = sys.argv[5] if len(sys.argv) > 5 else None
verifier = secrets.token_urlsafe(48)
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
login = requests.get(f"{base}/auth/login", headers={"Accept": "application/json"}, timeout=10, params={
    "client_id": client_id, "redirect_uri": redirect_uri, "response_type": "code", "state": "st",
    "code_challenge": challenge, "code_challenge_method": "S256"})
login.raise_for_status()
# The provider's login form: POST sub=<user> to the authorization URL.
at_provider = requests.post(login.json()["authorization_url"], data={"sub": user}, allow_redirects=False, timeout=10)
assert at_provider.status_code == 302, f"provider answered {at_provider.status_code}"
callback = requests.get(at_provider.headers["Location"], allow_redirects=False, timeout=10)
assert callback.status_code == 302, f"callback answered {callback.status_code}: {callback.text}"
app = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback.headers["Location"]).query))
assert "code" in app, f"no handoff code: {callback.headers['Location']}"
headers = {}
if dpop_key:
    proof = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "dpop_proof.py"), dpop_key, "POST",
                            f"{base}/auth/token"], check=True, capture_output=True, text=True).stdout.strip()
    headers["DPoP"] = proof
token = requests.post(f"{base}/auth/token", timeout=10, headers=headers, data={
    "grant_type": "authorization_code", "code": app["code"], "code_verifier": verifier,
    "redirect_uri": redirect_uri, "client_id": client_id})
assert token.status_code == 200, f"token answered {token.status_code}: {token.text}"
print(json.dumps(token.json()))
