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

extension Array where Element == UInt8 {
    /// Appends `name`, `separator`, `value` and a NUL (a header field as the server keeps it),
    /// assembled on the stack and copied in once: four appends check capacity and uniqueness four
    /// times (every field of every request and answer comes through here). `edit` may change the
    /// value's bytes in place before they are appended.
    mutating func appendField(
        _ name: UnsafeRawBufferPointer,
        separator: StaticString,
        _ value: UnsafeRawBufferPointer,
        edit: (UnsafeMutableRawBufferPointer) -> Void = { _ in }
    ) {
        let separatorCount = separator.utf8CodeUnitCount
        let total = name.count + separatorCount + value.count + 1
        withUnsafeTemporaryAllocation(byteCount: total, alignment: 1) { line in
            guard let base = line.baseAddress else { return }
            if let source = name.baseAddress { base.copyMemory(from: source, byteCount: name.count) }
            (base + name.count).copyMemory(from: separator.utf8Start, byteCount: separatorCount)
            let valueStart = name.count + separatorCount
            if let source = value.baseAddress { (base + valueStart).copyMemory(from: source, byteCount: value.count) }
            edit(UnsafeMutableRawBufferPointer(rebasing: line[valueStart..<(valueStart + value.count)]))
            line[total - 1] = 0
            append(contentsOf: UnsafeRawBufferPointer(line))
        }
    }
}
