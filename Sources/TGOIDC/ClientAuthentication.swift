import Foundation
import HTTPTypes
import TGBase
public import TGCrypto

/// How TokenGate proves to the token endpoint that it is the client (RFC 6749 §2.3, OIDC Core §9).
public enum ClientAuthentication: Sendable, CustomStringConvertible {
    /// HTTP Basic with the form-urlencoded client id and secret (RFC 6749 §2.3.1).
    case clientSecretBasic(secret: String)
    /// `client_id` and `client_secret` in the form body.
    case clientSecretPost(secret: String)
    /// A JWT signed with TokenGate's private key (RFC 7523 §2.2), `kid` in its header (none when
    /// empty); with a `certificate` for that key (Entra ID's certificate credentials), also the
    /// certificate's thumbprints `x5t#S256` and `x5t`, by which the provider finds the key.
    case privateKeyJWT(key: PrivateKey, keyID: String, algorithm: JWSAlgorithm, certificate: Certificate? = nil)

    public var description: String {
        switch self {
        case .clientSecretBasic: "client_secret_basic"
        case .clientSecretPost: "client_secret_post"
        case .privateKeyJWT: "private_key_jwt"
        }
    }

    /// Adds the credentials to a token, revocation or similar request to `endpoint`.
    func apply(
        clientID: String,
        endpoint: String,
        now: Date,
        form: inout [(name: String, value: String)],
        headers: inout HTTPFields
    ) throws(OIDCError) {
        switch self {
        case .clientSecretBasic(let secret):
            let pair = "\(FormURLEncoding.escape(clientID)):\(FormURLEncoding.escape(secret))"
            headers[.authorization] = "Basic " + Data(pair.utf8).base64EncodedString()
        case .clientSecretPost(let secret):
            form.append(("client_id", clientID))
            form.append(("client_secret", secret))
        case .privateKeyJWT(let key, let keyID, let algorithm, let certificate):
            let issuedAt = Int(now.timeIntervalSince1970)
            let claims: [String: Any] = [
                "iss": clientID, "sub": clientID, "aud": endpoint,
                "jti": SecureRandom.token(), "iat": issuedAt, "nbf": issuedAt, "exp": issuedAt + 120,
            ]
            guard let payload = SortedJSON.data(claims) else {
                throw OIDCError(.misconfigured("client assertion could not be encoded"))
            }
            let assertion: String
            do {
                var thumbprints: [String: String] = [:]
                if let certificate {
                    thumbprints["x5t#S256"] = certificate.sha256Thumbprint
                    thumbprints["x5t"] = certificate.sha1Thumbprint
                }
                assertion = try JWS.sign(
                    payload: Array(payload),
                    algorithm: algorithm,
                    keyID: keyID.isEmpty ? nil : keyID,
                    type: "JWT",
                    headerMembers: thumbprints,
                    using: key
                )
            } catch {
                throw OIDCError(.misconfigured("the private key does not fit \(algorithm.rawValue)"))
            }
            form.append(("client_id", clientID))
            form.append(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"))
            form.append(("client_assertion", assertion))
        }
    }
}
