public import Foundation
import Synchronization
public import TGBase
public import TGCrypto

/// Whether an app's tokens are bound to a key it holds (RFC 9449), per app.
public enum DPoPMode: String, Sendable, Hashable, CaseIterable {
    /// Bearer tokens; a `DPoP` header is ignored.
    case off
    /// Tokens are bound when the token request carries a proof.
    case allowed
    /// Every token request must carry a proof; every token is bound.
    case required
}

/// How DPoP proofs are checked (docs/architecture.md, "DPoP").
public struct DPoPSettings: Sendable {
    /// The signature algorithms a proof may use (never `none` or HMAC: ``JWSAlgorithm`` has neither).
    public var algorithms: [JWSAlgorithm] = [.es256, .es384, .edDSA, .ps256, .rs256]
    /// A proof's `iat` may be at most this old.
    public var proofMaxAge: TimeInterval = 60
    /// …and at most this far in the future (clock skew).
    public var futureSkew: TimeInterval = 5
    /// Every proof must carry a nonce TokenGate issued (`DPoP-Nonce`, RFC 9449 §8).
    public var requireNonce = false
    /// A nonce is issued anew this often and accepted for twice as long.
    public var nonceLifetime: TimeInterval = 300
    /// Proofs remembered per instance for the replay check (`jti`); past it, proofs are refused.
    public var replayCapacity = 1_000_000

    public init() {}
}

/// A refused DPoP proof (RFC 9449 §7.1 and §8): the caller answers 400 at the token endpoint,
/// 401 with a `DPoP` challenge at a resource.
public struct DPoPError: Error, Sendable, Equatable {
    public enum Code: String, Sendable {
        case invalidProof = "invalid_dpop_proof"
        /// The proof lacks a current nonce: retry with ``DPoPError/nonce``.
        case useNonce = "use_dpop_nonce"
        /// At a resource: a bound token sent as `Bearer`, or an unbound one as `DPoP`.
        case invalidToken = "invalid_token"
    }

    public var code: Code
    /// What is wrong; never a token or the proof.
    public var description: String
    /// With ``Code/useNonce``: the nonce to send.
    public var nonce: String?
    /// The `alg` values proofs may use (a resource's challenge names them).
    public var algorithms: [String] = []

    public init(_ code: Code, _ description: String, nonce: String? = nil) {
        self.code = code
        self.description = description
        self.nonce = nonce
    }

    static func invalid(_ description: String) -> DPoPError { DPoPError(.invalidProof, description) }
}

/// The HTTP request a proof must match.
public struct DPoPTarget: Sendable {
    /// `htm`: the request's method.
    public var method: String
    /// `htu`: TokenGate's public base URL and the request's path, without query or fragment.
    public var uri: String
    /// At a resource: the access token presented with the proof (its hash is the proof's `ath`).
    public var accessToken: Substring?

    public init(method: String, uri: String, accessToken: Substring? = nil) {
        self.method = method
        self.uri = uri
        self.accessToken = accessToken
    }
}

/// Checks DPoP proofs (RFC 9449 §4.3): one per process, shared by every request and loop.
public final class DPoPVerifier: Sendable {
    public let settings: DPoPSettings
    private let allowed: Set<JWSAlgorithm>
    private let replays: DPoPReplayCache
    private let nonces: DPoPNonces
    private let clock: WallClock
    /// Proof headers seen and checked before, by their base64url form: an app signs every call
    /// with the same key, so the header's JSON, the key's import and its thumbprint are done once.
    private let headers = Mutex<[Substring: CheckedHeader]>([:])
    private static let headerCacheLimit = 10_000

    private struct CheckedHeader {
        let header: JWSHeader
        let key: PublicKey
        let thumbprint: String
    }

    public init(settings: DPoPSettings = DPoPSettings(), vault: TokenVault, clock: WallClock = .system) {
        self.settings = settings
        allowed = Set(settings.algorithms)
        replays = DPoPReplayCache(window: settings.proofMaxAge + settings.futureSkew, capacity: settings.replayCapacity)
        nonces = DPoPNonces(vault: vault, lifetime: settings.nonceLifetime)
        self.clock = clock
    }

    /// The `alg` values proofs may use, for `dpop_signing_alg_values_supported` and challenges.
    public var algorithmNames: [String] { settings.algorithms.map(\.rawValue) }

    /// The nonce to hand out now (`DPoP-Nonce`), when nonces are required.
    public func currentNonce() -> String? {
        settings.requireNonce ? nonces.current(now: clock.now()) : nil
    }

    /// Verifies `proof` (the `DPoP` header's value) for `target`; returns the RFC 7638 thumbprint
    /// of its key (`jkt`). A proof is accepted once per instance.
    public func verify(_ proof: String, for target: DPoPTarget) throws(DPoPError) -> String {
        let now = clock.now()
        guard proof.utf8.count <= 8192 else { throw .invalid("The DPoP header is not a compact JWS.") }
        let segment = proof.utf8.firstIndex(of: UInt8(ascii: ".")).map { proof[..<$0] } ?? proof[...]
        let checked = headers.withLock { $0[segment] }
        let parsed = try? checked.map { try JWS(compactSerialization: proof, knownHeader: $0.header) } ?? JWS(compactSerialization: proof)
        guard let jws = parsed else { throw .invalid("The DPoP header is not a compact JWS.") }
        guard jws.header.type == "dpop+jwt" else { throw .invalid("A DPoP proof's typ must be dpop+jwt.") }
        guard let algorithm = jws.algorithm, allowed.contains(algorithm) else {
            throw .invalid("A DPoP proof's alg must be one of \(algorithmNames.joined(separator: ", ")).")
        }
        let jkt: String
        if let checked {
            do {
                try jws.verify(using: checked.key, allowedAlgorithms: [algorithm])
            } catch {
                throw .invalid("The DPoP proof's signature does not verify with its jwk.")
            }
            jkt = checked.thumbprint
        } else {
            jkt = try key(of: jws, algorithm: algorithm, segment: segment)
        }
        guard let claims = try? JSONDecoder().decode(ProofClaims.self, from: Data(jws.payload)), (1...512).contains(claims.jti.utf8.count)
        else { throw .invalid("A DPoP proof needs jti, htm, htu and iat claims.") }
        let (jti, htm, htu, iat) = (claims.jti, claims.htm, claims.htu, Date(timeIntervalSince1970: claims.iat))
        guard htm == target.method else { throw .invalid("The DPoP proof's htm is not this request's method.") }
        // Byte for byte equal is the common case; else both normalised.
        guard htu == target.uri || (Self.normalizedHTU(target.uri).map { $0 == Self.normalizedHTU(htu) } ?? false) else {
            throw .invalid("The DPoP proof's htu is not this request's URL (scheme, host and path, no query).")
        }
        guard iat >= now.addingTimeInterval(-settings.proofMaxAge), iat <= now.addingTimeInterval(settings.futureSkew) else {
            throw .invalid("The DPoP proof's iat is too old or in the future: make a new proof for each request.")
        }
        if let token = target.accessToken {
            guard let ath = claims.ath,
                Digest.constantTimeEqual(Array(ath.utf8), Array(Base64URL.encode(Digest.sha256(utf8: token)).utf8))
            else { throw .invalid("The DPoP proof's ath is not the hash of the access token sent with it.") }
        }
        if settings.requireNonce {
            guard let nonce = claims.nonce, nonces.isValid(nonce, now: now) else {
                throw DPoPError(.useNonce, "Send the DPoP-Nonce of this answer in the proof's nonce claim.", nonce: nonces.current(now: now))
            }
        }
        switch replays.insert(DPoPReplayCache.Key(jkt: jkt, jti: jti), now: now) {
        case .fresh: return jkt
        case .replayed: throw .invalid("This DPoP proof was used before: make a new proof (a new jti) for each request.")
        case .full: throw .invalid("TokenGate remembers too many recent proofs to check this one; try again shortly.")
        }
    }

    /// The proof's key: a public JWK in the header, which signed the proof. Returns its thumbprint,
    /// and keeps the checked header for the next proof that starts with `segment`.
    private func key(of jws: JWS, algorithm: JWSAlgorithm, segment: Substring) throws(DPoPError) -> String {
        guard let header = (try? JSONSerialization.jsonObject(with: Data(jws.header.json))) as? [String: Any],
            let object = header["jwk"] as? [String: Any]
        else { throw .invalid("A DPoP proof's header needs the public key as jwk.") }
        guard Self.privateMembers.allSatisfy({ object[$0] == nil }) else {
            throw .invalid("A DPoP proof's jwk must be a public key only.")
        }
        guard let jwk = try? JWK(object: object), let thumbprint = try? jwk.thumbprint() else {
            throw .invalid("A DPoP proof's jwk is not a usable RSA, EC or OKP key.")
        }
        guard let key = try? PublicKey(jwk: jwk) else { throw .invalid("A DPoP proof's jwk is not a usable key.") }
        do {
            try jws.verify(using: key, allowedAlgorithms: [algorithm])
        } catch {
            throw .invalid("The DPoP proof's signature does not verify with its jwk.")
        }
        // Kept only once its signature verified: a header never checked cannot be planted.
        headers.withLock { headers in
            if headers.count >= Self.headerCacheLimit { headers.removeAll(keepingCapacity: true) }
            headers[Substring(String(segment))] = CheckedHeader(header: jws.header, key: key, thumbprint: thumbprint)
        }
        return thumbprint
    }

    /// A proof's claims (RFC 9449 §4.2); others are ignored.
    private struct ProofClaims: Decodable {
        let jti: String
        let htm: String
        let htu: String
        let iat: Double
        let ath: String?
        let nonce: String?
    }

    /// JWK members only a private (or symmetric) key has.
    static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// `uri` normalised for comparison (RFC 9449 §4.3 with RFC 3986 §6.2.2–6.2.3): scheme and
    /// host in lower case, the scheme's default port dropped, an empty path as `/`, percent
    /// escapes of unreserved characters decoded and the others in upper case; query and fragment
    /// dropped. nil for what is not an absolute http(s) URL, or one with user information.
    static func normalizedHTU(_ uri: String) -> String? {
        guard let schemeEnd = uri.range(of: "://") else { return nil }
        let scheme = uri[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        var rest = uri[schemeEnd.upperBound...]
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<pathStart].lowercased()
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        if (scheme == "https" && authority.hasSuffix(":443")) || (scheme == "http" && authority.hasSuffix(":80")) {
            authority.removeLast(scheme == "https" ? 4 : 3)
        }
        guard let path = normalizedPercentEncoding(rest[pathStart...]) else { return nil }
        return scheme + "://" + authority + (path.isEmpty ? "/" : path)
    }

    private static func normalizedPercentEncoding(_ path: Substring) -> String? {
        let bytes = Array(path.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "%") else {
                output.append(bytes[index])
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = FormURLEncoding.hexValue(bytes[index + 1]), let low = FormURLEncoding.hexValue(bytes[index + 2])
            else { return nil }
            let value = high << 4 | low
            if Syntax.isBase64URL(value) || value == UInt8(ascii: ".") || value == UInt8(ascii: "~") {
                output.append(value)
            } else {
                output += Array(String(format: "%%%02X", value).utf8)
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}

extension AuthService {
    /// The key new tokens of `client` are bound to: the verified proof's (`proofKey`) when the app
    /// uses DPoP, none when it does not; a token request without a proof is refused when the app
    /// requires one.
    func bindingKey(_ proofKey: String?, client: String) throws(OAuthError) -> String? {
        switch clients[client]?.dpop ?? .off {
        case .off:
            return nil
        case .allowed:
            return proofKey
        case .required:
            guard let proofKey else {
                throw OAuthError(.invalidDPoPProof, "This app's tokens are DPoP-bound (RFC 9449): send a DPoP proof with the token request.")
            }
            return proofKey
        }
    }

    static let otherDPoPKey = OAuthError(
        .invalidDPoPProof,
        "This token is DPoP-bound: send a DPoP proof signed by the key it is bound to."
    )

    /// The `token_type` of tokens bound to `jkt` (RFC 9449 §5).
    static func tokenType(_ jkt: String?) -> String { jkt == nil ? "Bearer" : "DPoP" }
}
