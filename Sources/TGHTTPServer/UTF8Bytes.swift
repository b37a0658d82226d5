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
