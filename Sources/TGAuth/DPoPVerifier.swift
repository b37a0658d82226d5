import Foundation
import Synchronization
public import TGBase
import TGCrypto

/// Checks DPoP proofs (RFC 9449 §4.3): one per process, shared by every request and loop. No
/// I/O; whether a proof was used before is the caller's second step (``DPoPProof``).
///
/// What an attacker chooses costs little: RSA keys are 2048 to 4096 bits with a small odd
/// exponent, the key is compared with the one a token is bound to, and every claim is checked,
/// before the one signature check.
public final class DPoPVerifier: Sendable {
    public let settings: DPoPSettings
    private let allowed: Set<JWSAlgorithm>
    let replays: DPoPReplayCache
    private let nonces: DPoPNonces
    private let clock: WallClock
    /// Proof headers seen and checked before, by their base64url form: an app signs every call
    /// with the same key, so the header's JSON, the key's import and its thumbprint are done once.
    private let headers = Mutex<[Substring: CheckedHeader]>([:])
    private static let headerCacheLimit = 10_000
    private let verifications = Atomic<Int>(0)

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

    /// Signatures checked so far: a refusal that needs none does not count.
    public var signatureChecks: Int { verifications.load(ordering: .relaxed) }

    /// The nonce to hand out now (`DPoP-Nonce`), when nonces are required.
    public func currentNonce() -> String? {
        settings.requireNonce ? nonces.current(now: clock.now()) : nil
    }

    /// Verifies `proof` (the `DPoP` header's value) for `target`; with `boundTo`, a proof of
    /// another key is refused before its signature is checked. Does not record the proof.
    public func verify(_ proof: String, for target: DPoPTarget, boundTo: String? = nil) throws(DPoPError) -> DPoPProof {
        let now = clock.now()
        guard proof.utf8.count <= 8192 else { throw .invalid("The DPoP header is not a compact JWS.") }
        let segment = Self.headerPart(of: proof)
        let checked = headers.withLock { $0[segment] }
        let parsed = try? checked.map { try JWS(compactSerialization: proof, knownHeader: $0.header) } ?? JWS(compactSerialization: proof)
        guard let jws = parsed else { throw .invalid("The DPoP header is not a compact JWS.") }
        guard jws.header.type == "dpop+jwt" else { throw .invalid("A DPoP proof's typ must be dpop+jwt.") }
        guard let algorithm = jws.algorithm, allowed.contains(algorithm) else {
            throw .invalid("A DPoP proof's alg must be one of \(algorithmNames.joined(separator: ", ")).")
        }
        let jwk: JWK?
        let jkt: String
        if let checked {
            (jwk, jkt) = (nil, checked.thumbprint)
        } else {
            let key = try Self.publicJWK(of: jws)
            guard let thumbprint = try? key.thumbprint() else { throw .invalid("A DPoP proof's jwk is not a usable RSA, EC or OKP key.") }
            (jwk, jkt) = (key, thumbprint)
        }
        if let boundTo, jkt != boundTo {
            throw .invalid("The DPoP proof is signed by another key than the one this access token is bound to.")
        }
        let claims = try checkClaims(of: jws, for: target, now: now)
        let key: PublicKey
        if let checked { key = checked.key } else { key = try Self.importKey(jwk) }
        verifications.add(1, ordering: .relaxed)
        do {
            try jws.verify(using: key, allowedAlgorithms: [algorithm])
        } catch {
            throw .invalid("The DPoP proof's signature does not verify with its jwk.")
        }
        if checked == nil {
            // Kept only once its signature verified: a header never checked cannot be planted.
            headers.withLock { headers in
                if headers.count >= Self.headerCacheLimit { headers.removeAll(keepingCapacity: true) }
                headers[Substring(String(segment))] = CheckedHeader(header: jws.header, key: key, thumbprint: jkt)
            }
        }
        return DPoPProof(
            jkt: jkt,
            replayKey: DPoPReplayCache.Key(jkt: jkt, jti: claims.jti),
            acceptableUntil: Date(timeIntervalSince1970: claims.iat).addingTimeInterval(settings.proofMaxAge)
        )
    }

    /// The compact JWS's first part, up to its first `.` (all of it when there is none): found
    /// with `memchr` on the string's UTF-8 in place (walking `String.UTF8View` cost ~11
    /// instructions a byte, 6.8k for a proof with its key in the header).
    static func headerPart(of proof: String) -> Substring {
        var text = proof
        let length = text.withUTF8 { bytes -> Int? in
            guard let base = bytes.baseAddress, let dot = memchr(base, Int32(UInt8(ascii: ".")), bytes.count) else { return nil }
            return UnsafeRawPointer(dot) - UnsafeRawPointer(base)
        }
        guard let length else { return proof[...] }
        return proof[..<proof.utf8.index(proof.utf8.startIndex, offsetBy: length)]
    }

    /// The claims of a proof (RFC 9449 §4.3 steps 9–12), checked against `target` and `now`.
    private func checkClaims(of jws: JWS, for target: DPoPTarget, now: Date) throws(DPoPError) -> ProofClaims {
        guard let claims = try? JSONDecoder().decode(ProofClaims.self, from: Data(jws.payload)), (1...512).contains(claims.jti.utf8.count)
        else { throw .invalid("A DPoP proof needs jti, htm, htu and iat claims.") }
        guard claims.htm == target.method else { throw .invalid("The DPoP proof's htm is not this request's method.") }
        // Byte for byte equal is the common case; else both normalised.
        guard claims.htu == target.uri || (Self.normalizedHTU(target.uri).map { $0 == Self.normalizedHTU(claims.htu) } ?? false) else {
            throw .invalid("The DPoP proof's htu is not this request's URL (scheme, host and path, no query).")
        }
        let iat = Date(timeIntervalSince1970: claims.iat)
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
        return claims
    }

    /// The proof header's `jwk`: public members only, and an RSA key within
    /// ``rsaModulusBits`` with a small odd exponent (``rsaExponents``).
    private static func publicJWK(of jws: JWS) throws(DPoPError) -> JWK {
        guard let header = (try? JSONSerialization.jsonObject(with: Data(jws.header.json))) as? [String: Any],
            let object = header["jwk"] as? [String: Any]
        else { throw .invalid("A DPoP proof's header needs the public key as jwk.") }
        guard privateMembers.allSatisfy({ object[$0] == nil }) else {
            throw .invalid("A DPoP proof's jwk must be a public key only.")
        }
        guard let jwk = try? JWK(object: object) else { throw .invalid("A DPoP proof's jwk is not a usable RSA, EC or OKP key.") }
        if jwk.keyType == "RSA" {
            guard let modulus = jwk.modulus.flatMap({ try? Base64URL.decode($0) }),
                let exponent = jwk.exponent.flatMap({ try? Base64URL.decode($0) }),
                rsaModulusBits.contains(bitLength(modulus)), bitLength(exponent) <= 17,
                case let value = exponent.reduce(0, { $0 << 8 | Int($1) }), rsaExponents.contains(value), value % 2 == 1
            else {
                throw .invalid("A DPoP proof's RSA key must have a modulus of 2048 to 4096 bits and an odd exponent from 3 to 65537.")
            }
        }
        return jwk
    }

    private static func importKey(_ jwk: JWK?) throws(DPoPError) -> PublicKey {
        guard let jwk, let key = try? PublicKey(jwk: jwk) else { throw .invalid("A DPoP proof's jwk is not a usable key.") }
        return key
    }

    /// RSA moduli a proof's key may have: below is weak, above costs the verifier more than
    /// any app needs.
    static let rsaModulusBits = 2048...4096
    /// RSA public exponents a proof's key may have (odd ones): 65537 in practice.
    static let rsaExponents = 3...65537

    /// The number of significant bits of a big-endian unsigned integer.
    private static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bytes.count - first - 1) * 8 + (8 - bytes[first].leadingZeroBitCount)
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
                let digits = Hex.digits(value, uppercase: true)
                output += [UInt8(ascii: "%"), digits.high, digits.low]
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
