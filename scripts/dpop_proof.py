"""DPoP proofs (RFC 9449) as an app makes them, for scripts/dpop.sh and bench/dpop.sh.

    python3 scripts/dpop_proof.py KEY_FILE METHOD URL [ACCESS_TOKEN [NONCE]]
    python3 scripts/dpop_proof.py --many COUNT KEY_FILE METHOD URL ACCESS_TOKEN
    python3 scripts/dpop_proof.py --thumbprint KEY_FILE

KEY_FILE holds the app's P-256 key (PEM); it is made on first use. Each proof is an ES256 JWS
with typ dpop+jwt, the public key as jwk, a fresh jti, htm, htu, iat and, with an access token,
ath (its SHA-256). --many prints COUNT proofs, one per line; --thumbprint the key's RFC 7638
thumbprint (what TokenGate binds tokens to, cnf.jkt). Needs python3-cryptography.
"""
import base64, hashlib, json, os, sys, time, uuid

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def load_key(path):
    if not os.path.exists(path):
        key = ec.generate_private_key(ec.SECP256R1())
        with open(path, "wb") as file:
            file.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
        os.chmod(path, 0o600)
    with open(path, "rb") as file:
        return serialization.load_pem_private_key(file.read(), password=None)


def public_jwk(key):
    numbers = key.public_key().public_numbers()
    return {"kty": "EC", "crv": "P-256", "x": b64(numbers.x.to_bytes(32, "big")), "y": b64(numbers.y.to_bytes(32, "big"))}


def thumbprint(key):
    jwk = public_jwk(key)
    canonical = json.dumps({name: jwk[name] for name in ("crv", "kty", "x", "y")}, separators=(",", ":"))
    return b64(hashlib.sha256(canonical.encode()).digest())


def proof(key, header, method, url, access_token=None, nonce=None):
    claims = {"jti": str(uuid.uuid4()), "htm": method, "htu": url, "iat": int(time.time())}
    if access_token:
        claims["ath"] = b64(hashlib.sha256(access_token.encode()).digest())
    if nonce:
        claims["nonce"] = nonce
    signing_input = header + "." + b64(json.dumps(claims, separators=(",", ":")).encode())
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def main(arguments):
    count = 1
    if arguments[:1] == ["--thumbprint"]:
        print(thumbprint(load_key(arguments[1])))
        return
    if arguments[:1] == ["--many"]:
        count, arguments = int(arguments[1]), arguments[2:]
    key_file, method, url = arguments[:3]
    access_token = arguments[3] if len(arguments) > 3 else None
    nonce = arguments[4] if len(arguments) > 4 else None
    key = load_key(key_file)
    header = b64(json.dumps({"alg": "ES256", "typ": "dpop+jwt", "jwk": public_jwk(key)}, separators=(",", ":")).encode())
    out = sys.stdout
    for _ in range(count):
        out.write(proof(key, header, method, url, access_token, nonce) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
