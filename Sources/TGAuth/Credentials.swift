import Foundation
public import TGCrypto
public import TGStore

/// TokenGate's own opaque credentials (access and refresh tokens, handoff codes, device secrets):
/// 256 random bits, base64url, stored only as their SHA-256.
public struct OpaqueToken: Sendable {
    public let value: String

    /// A fresh random token.
    public static func mint() -> OpaqueToken { OpaqueToken(value: SecureRandom.token(byteCount: 32)) }

    /// The stored form of `value`.
    public var hash: TokenHash { Self.hash(value) }

    /// The stored form of a presented token, or nil for one that cannot be TokenGate's (empty,
    /// too long or not base64url), so that garbage never reaches a query.
    public static func hashIfWellFormed(_ presented: String) -> TokenHash? {
        hashIfWellFormed(presented[...])
    }

    /// The same for a token still in its header. Not generic: the bytes are lent, checked and
    /// hashed without a protocol dispatch (every proxied call's token comes here).
    public static func hashIfWellFormed(_ presented: Substring) -> TokenHash? {
        // On the bytes in place: every proxied call's token is checked here.
        let wellFormed = presented.utf8.withContiguousStorageIfAvailable(isWellFormed) ?? Array(presented.utf8).withUnsafeBufferPointer(isWellFormed)
        return wellFormed ? hash(presented) : nil
    }

    /// The same for a token's bytes lent in place (its header field's, on the proxy's path).
    public static func hashIfWellFormed(_ presented: UnsafeBufferPointer<UInt8>) -> TokenHash? {
        isWellFormed(presented) ? TokenHash(Digest.sha256(presented)) : nil
    }

    private static func isWellFormed(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard (16...128).contains(bytes.count) else { return false }
        for byte in bytes {
            let alphanumeric = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            guard alphanumeric || byte == 0x2D || byte == 0x5F else { return false }
        }
        return true
    }

    static func hash(_ value: String) -> TokenHash { hash(value[...]) }

    static func hash(_ value: Substring) -> TokenHash { TokenHash(Digest.sha256(utf8: value)) }
}

/// Secrets at rest: AES-256-GCM blobs that name their key (``KeyRing``), each bound to the row it
/// belongs to by associated data, so a blob copied into another row does not open.
public struct TokenVault: Sendable {
    public let keyRing: KeyRing

    public init(keyRing: KeyRing) { self.keyRing = keyRing }

    public var currentKeyID: String { keyRing.currentKeyID }

    /// `plaintext` sealed under the current key, bound to `context` (e.g. `grant:<account id>`).
    public func seal(_ plaintext: String, context: String) throws(CryptoError) -> SealedBlob {
        SealedBlob(try keyRing.seal(Array(plaintext.utf8), associatedData: Array(context.utf8)))
    }

    public func open(_ blob: SealedBlob, context: String) throws(CryptoError) -> String {
        String(decoding: try keyRing.open(blob.bytes, associatedData: Array(context.utf8)), as: UTF8.self)
    }

    /// The blob sealed again under the current key, or nil when it already is.
    func reseal(_ blob: SealedBlob, context: String) throws(CryptoError) -> SealedBlob? {
        try keyRing.resealUnderCurrentKey(blob.bytes, associatedData: Array(context.utf8)).map(SealedBlob.init)
    }

    enum Context {
        static func grant(_ account: UUID) -> String { "grant:\(account.uuidString.lowercased())" }
        static func idToken(_ account: UUID) -> String { "id_token:\(account.uuidString.lowercased())" }
        static func pendingLogin(_ stateHash: TokenHash) -> String {
            "pending:" + Base64URL.encode(stateHash.bytes)
        }
        static func replay(_ session: UUID) -> String { "replay:\(session.uuidString.lowercased())" }
        static func transferReplay(_ codeHash: TokenHash) -> String {
            "transfer_replay:" + Base64URL.encode(codeHash.bytes)
        }
        static func accessToken(_ account: UUID, scopeKey: String) -> String {
            "access:\(account.uuidString.lowercased()):\(scopeKey)"
        }
    }
}
