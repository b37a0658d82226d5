public import Foundation
import TGBase
public import TGPostgres

/// The stored form of one of TokenGate's own opaque credentials (access and refresh tokens,
/// handoff codes, device secrets, login states): its SHA-256, never the credential itself.
public struct TokenHash: Sendable, Hashable {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    // A token hash is a cache key looked up on every proxied call: the synthesized conformance
    // would feed the hasher byte by byte (~1 000 instructions), all 32 bytes in one piece still
    // cost ~200. A SHA-256's first eight bytes are as evenly spread as all of it, and no caller
    // chooses them (they would have to find tokens whose digests collide there); equality still
    // compares every byte.
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { raw in
            guard raw.count >= 8 else { return hasher.combine(bytes: raw) }
            hasher.combine(raw.loadUnaligned(as: UInt64.self))
        }
    }

    /// What `Set` and `Dictionary` ask for: the same eight bytes, spread by a multiplication
    /// instead of SipHash (``WordKey``; no client chooses a digest's bytes).
    public func _rawHashValue(seed: Int) -> Int {
        var word: UInt64 = 0
        bytes.withUnsafeBytes { raw in withUnsafeMutableBytes(of: &word) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw.prefix(8))) } }
        return WordKey.hash(word, seed: seed)
    }

    public static func == (lhs: TokenHash, rhs: TokenHash) -> Bool {
        lhs.bytes.withUnsafeBytes { left in
            rhs.bytes.withUnsafeBytes { right in
                left.count == right.count && (left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
    }
}

/// A secret at rest: an AES-256-GCM blob that names its key (sealed and opened by the domain's
/// vault; the store only keeps it).
public struct SealedBlob: Sendable, Equatable {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }
}

extension TokenHash: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { PostgresBytes(bytes).postgresText }
    public static var postgresTypeOID: UInt32 { PostgresBytes.postgresTypeOID }
    public init?(postgresText: String) {
        guard let bytes = PostgresBytes(postgresText: postgresText) else { return nil }
        self.init(bytes.bytes)
    }
}

extension SealedBlob: PostgresEncodable, PostgresDecodable {
    public var postgresText: String { PostgresBytes(bytes).postgresText }
    public static var postgresTypeOID: UInt32 { PostgresBytes.postgresTypeOID }
    public init?(postgresText: String) {
        guard let bytes = PostgresBytes(postgresText: postgresText) else { return nil }
        self.init(bytes.bytes)
    }
}

/// An account as stored: who it is at which provider, its state and the claims an app may show.
public struct StoredAccount: Sendable, Equatable {
    public var id: UUID
    public var provider: String
    public var issuer: String
    public var subject: String
    public var tenant: String?
    /// The display claims, a JSON object as text.
    public var claims: String
    /// `active`, or `stale` (its grant is dead).
    public var state: String

    init(row: PostgresRow, idColumn: String = "id") throws {
        id = try row.value(UUID.self, idColumn)
        provider = try row.value(String.self, "provider")
        issuer = try row.value(String.self, "issuer")
        subject = try row.value(String.self, "subject")
        tenant = try row.value(String?.self, "tenant")
        claims = try row.value(String.self, "claims")
        state = try row.value(String.self, "state")
    }
}
