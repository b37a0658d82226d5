internal import Foundation
import TGBase

/// A JSON Web Key (RFC 7517) as data: the members TGCrypto reads and writes, all strings.
///
/// A `JWK` is not checked beyond its JSON shape; ``PublicKey/init(jwk:)`` validates the key
/// material. Private members (`d`, `p`, …) are never read.
public struct JWK: Sendable, Hashable {
    /// `kty`: `"RSA"`, `"EC"` or `"OKP"` (Ed25519) for keys TGCrypto can use; other types parse
    /// but do not load.
    public var keyType: String
    /// `kid`, the key ID a JWS header names.
    public var keyID: String?
    /// `alg`, the one algorithm the key is meant for, if its publisher says.
    public var algorithm: String?
    /// `use`: `"sig"` or `"enc"`, if given.
    public var use: String?
    /// `n`, an RSA modulus, base64url big-endian.
    public var modulus: String?
    /// `e`, an RSA public exponent, base64url big-endian.
    public var exponent: String?
    /// `crv`, a curve name: `"P-256"` or `"P-384"` (EC), `"Ed25519"` (OKP).
    public var curve: String?
    /// `x`, an EC point's x coordinate, base64url, exactly the field size; or an OKP public key.
    public var x: String?
    /// `y`, an EC point's y coordinate, base64url, exactly the field size.
    public var y: String?

    /// A JWK from its members.
    public init(
        keyType: String,
        keyID: String? = nil,
        algorithm: String? = nil,
        use: String? = nil,
        modulus: String? = nil,
        exponent: String? = nil,
        curve: String? = nil,
        x: String? = nil,
        y: String? = nil
    ) {
        self.keyType = keyType
        self.keyID = keyID
        self.algorithm = algorithm
        self.use = use
        self.modulus = modulus
        self.exponent = exponent
        self.curve = curve
        self.x = x
        self.y = y
    }

    /// Parses one JWK from JSON (UTF-8). Unknown members are ignored; `kty` must be a string,
    /// and every member TGCrypto reads must be a string when present, or this throws
    /// ``CryptoError/malformed``.
    public init(json: [UInt8]) throws(CryptoError) {
        guard let object = Self.jsonObject(json) else { throw .malformed }
        try self.init(object: object)
    }

    /// The same from a parsed JSON object (a `jwk` header member).
    public init(object: [String: Any]) throws(CryptoError) {
        func member(_ name: String) throws(CryptoError) -> String? {
            guard let value = object[name] else { return nil }
            guard let string = value as? String else { throw .malformed }
            return string
        }
        guard let keyType = try member("kty") else { throw .malformed }
        self.init(
            keyType: keyType,
            keyID: try member("kid"),
            algorithm: try member("alg"),
            use: try member("use"),
            modulus: try member("n"),
            exponent: try member("e"),
            curve: try member("crv"),
            x: try member("x"),
            y: try member("y")
        )
    }

    /// The JWK as a JSON object with sorted members (UTF-8), omitting absent members.
    public func json() -> [UInt8] {
        Self.serialize(jsonObject())
    }

    func jsonObject() -> [String: String] {
        let members: [(String, String?)] = [
            ("kty", keyType), ("kid", keyID), ("alg", algorithm), ("use", use),
            ("n", modulus), ("e", exponent), ("crv", curve), ("x", x), ("y", y),
        ]
        var object = [String: String]()
        for (name, value) in members { object[name] = value }
        return object
    }

    static func jsonObject(_ bytes: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }

    static func serialize(_ object: Any) -> [UInt8] {
        // Only dictionaries, arrays and strings built here reach this, which always serialize.
        SortedJSON.data(object)!
    }
}

/// A JWK Set (RFC 7517 §5): what an identity provider's `jwks_uri` serves.
public struct JWKSet: Sendable, Hashable {
    /// The keys, in document order.
    public var keys: [JWK]

    /// A set of `keys`.
    public init(keys: [JWK]) {
        self.keys = keys
    }

    /// Parses `{"keys": [...]}`. Throws ``CryptoError/malformed`` unless the document is an
    /// object with a `keys` array; an entry that is not a usable JWK object is skipped, as
    /// RFC 7517 §5 asks for keys an implementation does not understand.
    public init(json: [UInt8]) throws(CryptoError) {
        guard let object = JWK.jsonObject(json), let entries = object["keys"] as? [Any] else { throw .malformed }
        keys = entries.compactMap { entry in
            guard let member = entry as? [String: Any] else { return nil }
            return try? JWK(object: member)
        }
    }

    /// The keys whose `kid` is `keyID`.
    public func keys(withID keyID: String) -> [JWK] {
        keys.filter { $0.keyID == keyID }
    }

    /// The set as JSON (UTF-8), for serving a JWKS endpoint.
    public func json() -> [UInt8] {
        JWK.serialize(["keys": keys.map { $0.jsonObject() }])
    }
}
