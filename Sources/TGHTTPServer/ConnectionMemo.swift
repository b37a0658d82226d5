#if canImport(Glibc)
import Glibc
#endif

/// What a handler derived from bytes of a connection's request (a credential's hash), kept for
/// the connection's next request: a keep-alive client sends the same credential on each, so
/// checking its form and hashing it is done once per connection instead of once per request. One
/// entry, compared byte for byte; what the derived bytes mean is the handler's business. Never a
/// verdict (a session, a permission): only what is a pure function of the bytes.
public final class ConnectionMemo: @unchecked Sendable {
    // Invariant: read and written only on the event loop that serves the connection, by the
    // request it is handling (its requests are handled one after another); see
    // `ServerRequest.connectionMemo`.
    private var key: [UInt8] = []
    private var derived: [UInt8] = []

    public init() {}

    /// What was remembered for exactly `bytes`, if anything.
    public func value(for bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard !key.isEmpty, key.count == bytes.count else { return nil }
        let same = key.withUnsafeBufferPointer { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
        return same ? derived : nil
    }

    /// Remembers `value` for `bytes`, in place of what was remembered.
    public func remember(_ value: [UInt8], for bytes: UnsafeBufferPointer<UInt8>) {
        key = Array(bytes)
        derived = value
    }
}
