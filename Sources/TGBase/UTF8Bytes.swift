extension StringProtocol {
    /// `body` on the string's UTF-8 bytes: in place when they are contiguous (every native
    /// string), else copied once. Byte checks on the hot path go through here instead of
    /// `UTF8View` indices, which cost tens of instructions per byte. Inlinable, so that each caller
    /// gets it specialized (a generic call across modules would not be).
    @inlinable
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        return try Array(utf8).withUnsafeBufferPointer(body)
    }
}
