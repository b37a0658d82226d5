/// The protected header of a JWS: the members TGCrypto interprets, and the whole JSON.
public struct JWSHeader: Sendable, Hashable {
    /// `alg` as written, which may be one TGCrypto refuses (`none`, `HS256`, …).
    public let algorithm: String
    /// `kid`, the key ID to look up in the signer's JWK Set.
    public let keyID: String?
    /// `typ`, e.g. `JWT`.
    public let type: String?
    /// The decoded header JSON (UTF-8), for members not modelled here.
    public let json: [UInt8]
}

/// A JWS in compact serialization (RFC 7515 §7.1): `header.payload.signature`.
///
/// Parsing checks the form only; nothing in ``header`` or ``payload`` is trustworthy until
/// ``verify(using:allowedAlgorithms:)`` returns.
public struct JWS: Sendable, Hashable {
    /// The protected header.
    public let header: JWSHeader
    /// The payload bytes (for a JWT, the claims JSON).
    public let payload: [UInt8]
    /// The signature bytes (for ECDSA, `r || s`).
    public let signature: [UInt8]
    /// `ASCII(BASE64URL(header) || '.' || BASE64URL(payload))`, what the signature covers.
    let signingInput: [UInt8]

    /// Parses a compact JWS. Throws ``CryptoError/malformed`` unless there are exactly three
    /// strictly base64url parts, the header is a JSON object with a string `alg` (and string
    /// `kid` / `typ` when present), and there is no `crit` member (no extension is understood).
    public init(compactSerialization: String) throws(CryptoError) {
        try self.init(compactSerialization, knownHeader: nil)
    }

    /// The same for a JWS whose header part is one parsed before (`known`, from a JWS whose
    /// compact form started with the same part): the part must decode to `known`'s JSON, byte for
    /// byte, and its JSON is not parsed again. A signer that sends many tokens with one header (a
    /// DPoP key) costs one header parse.
    public init(compactSerialization: String, knownHeader known: JWSHeader) throws(CryptoError) {
        try self.init(compactSerialization, knownHeader: known)
    }

    private init(_ compactSerialization: String, knownHeader known: JWSHeader?) throws(CryptoError) {
        let bytes = Array(compactSerialization.utf8)
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty else { throw .malformed }
        let headerJSON = try Base64URL.decode(utf8: Array(parts[0]))
        payload = try Base64URL.decode(utf8: Array(parts[1]))
        signature = try Base64URL.decode(utf8: Array(parts[2]))
        signingInput = Array(bytes[0..<(parts[0].count + 1 + parts[1].count)])
        if let known {
            guard known.json == headerJSON else { throw .malformed }
            header = known
            return
        }

        // RFC 7515 §4.1.1: `alg` must be present; an empty name is no algorithm (found by fuzzing).
        guard let object = JWK.jsonObject(headerJSON), let algorithm = object["alg"] as? String, !algorithm.isEmpty, object["crit"] == nil
        else { throw .malformed }
        func optionalString(_ name: String) throws(CryptoError) -> String? {
            guard let value = object[name] else { return nil }
            guard let string = value as? String else { throw .malformed }
            return string
        }
        header = JWSHeader(algorithm: algorithm, keyID: try optionalString("kid"), type: try optionalString("typ"), json: headerJSON)
    }

    /// The header's algorithm if TGCrypto supports it, else `nil` (`none`, `HS256`, unknown).
    public var algorithm: JWSAlgorithm? { JWSAlgorithm(rawValue: header.algorithm) }
}
