import Crypto
public import Foundation

/// The P-256 key that DPoP proofs (RFC 9449) are signed with: one per install. Tokens the gateway
/// binds to it are useless to whoever copies them without it.
public protocol DPoPKey: Sendable {
    /// The public key, uncompressed (`0x04 ‖ x ‖ y`, 65 bytes).
    var publicKeyX963: Data { get }
    /// An ES256 signature of `message`: `r ‖ s`, 64 bytes.
    func signature(for message: Data) throws -> Data
}

/// A DPoP key in software (CryptoKit on Apple's systems, the same API over BoringSSL elsewhere):
/// where there is no Secure Enclave, and in tests.
public struct SoftwareDPoPKey: DPoPKey {
    let key: P256.Signing.PrivateKey

    /// A new random key.
    public init() {
        key = P256.Signing.PrivateKey()
    }

    /// The key of ``rawRepresentation``.
    public init(rawRepresentation: Data) throws {
        key = try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation)
    }

    /// The private key's bytes, for a ``CredentialStore``.
    public var rawRepresentation: Data { key.rawRepresentation }

    public var publicKeyX963: Data { key.publicKey.x963Representation }

    public func signature(for message: Data) throws -> Data {
        try key.signature(for: message).rawRepresentation
    }
}

/// The install's DPoP key, made once and kept.
public enum DPoPKeys {
    static let storeKey = "tokengate.dpop-key"
    static let kindKey = "tokengate.dpop-key-kind"

    /// The key kept in `store`, or a new one kept there: in the Secure Enclave when the device
    /// has one (the store then keeps only the enclave's handle to it), else in software.
    public static func loadOrCreate(in store: any CredentialStore) throws -> any DPoPKey {
        let kind = try store.data(for: kindKey).map { String(decoding: $0, as: UTF8.self) }
        if let data = try store.data(for: storeKey) {
            #if canImport(CryptoKit) && !os(Linux)
            if kind == "secure-enclave" { return try SecureEnclaveDPoPKey(dataRepresentation: data) }
            #endif
            if kind == nil || kind == "software" { return try SoftwareDPoPKey(rawRepresentation: data) }
        }
        #if canImport(CryptoKit) && !os(Linux)
        if SecureEnclaveDPoPKey.isAvailable {
            let key = try SecureEnclaveDPoPKey()
            try store.set(key.dataRepresentation, for: storeKey)
            try store.set(Data("secure-enclave".utf8), for: kindKey)
            return key
        }
        #endif
        let key = SoftwareDPoPKey()
        try store.set(key.rawRepresentation, for: storeKey)
        try store.set(Data("software".utf8), for: kindKey)
        return key
    }
}

/// DPoP proofs (RFC 9449 §4): a JWS with `typ: dpop+jwt`, the public key as `jwk`, and `jti`,
/// `htm`, `htu`, `iat`, with `ath` when a token goes with it and `nonce` when the server asked.
enum DPoPProof {
    static func make(key: any DPoPKey, method: String, url: URL, accessToken: String?, nonce: String?, now: Date) throws -> String {
        let point = key.publicKeyX963
        guard point.count == 65, point.first == 0x04 else { throw TokenGateClientError.invalidResponse("not a P-256 public key") }
        let jwk: [String: String] = [
            "kty": "EC", "crv": "P-256",
            "x": Base64URL.encode(point[1..<33]), "y": Base64URL.encode(point[33..<65]),
        ]
        let header: [String: Any] = ["typ": "dpop+jwt", "alg": "ES256", "jwk": jwk]
        var claims: [String: Any] = [
            "jti": UUID().uuidString,
            "htm": method.uppercased(),
            "htu": htu(url),
            "iat": Int(now.timeIntervalSince1970),
        ]
        if let accessToken { claims["ath"] = PKCE.hash(accessToken) }
        if let nonce { claims["nonce"] = nonce }
        let input =
            Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]))
            + "." + Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        return input + "." + Base64URL.encode(try key.signature(for: Data(input.utf8)))
    }

    /// The request's URL without its query and fragment (RFC 9449 §4.2).
    static func htu(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.absoluteString }
        components.query = nil
        components.fragment = nil
        return components.string ?? url.absoluteString
    }

    /// Whether an answer asks for a proof with a nonce: 400 `use_dpop_nonce` from the token
    /// endpoint, or 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` from a resource.
    static func asksForNonce(_ answer: GatewayAnswer) -> Bool {
        guard answer.header("DPoP-Nonce") != nil else { return false }
        if answer.status == 400 { return answer.errorCode == "use_dpop_nonce" }
        return answer.status == 401 && (answer.header("WWW-Authenticate") ?? "").contains("use_dpop_nonce")
    }
}
