/// Calls `body` with a pointer to `bytes` and their count. The pointer is never NULL, even for an
/// empty array: several OpenSSL functions treat NULL as "no input given" rather than "empty".
func withNonNullBytes<Result>(
    _ bytes: [UInt8],
    _ body: (UnsafePointer<UInt8>, Int) throws -> Result
) rethrows -> Result {
    if bytes.isEmpty {
        let placeholder: [UInt8] = [0]
        return try placeholder.withUnsafeBufferPointer { try body($0.baseAddress!, 0) }
    }
    return try bytes.withUnsafeBufferPointer { try body($0.baseAddress!, $0.count) }
}
