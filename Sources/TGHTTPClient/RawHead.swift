public import HTTPTypes

#if canImport(Glibc)
import Glibc
#endif

/// A response head as libcurl delivered it: the status and the header lines' bytes. Parsed by
/// whoever needs fields (``parse()``), or read line by line where building them would cost more
/// than the call (``forEachField(_:)``, the proxy's relay), so the event thread only copies bytes.
public struct RawHead: Sendable {
    public var status: Int
    var bytes: [UInt8]
    /// The announced `Content-Length`, if there is one and it is well-formed (the first such line
    /// decides).
    public let contentLength: Int?
    /// A `Connection` line names something other than `keep-alive` and `close`: fields, which do
    /// not pass a proxy (most answers say `keep-alive` or nothing, and need no look for them).
    public let connectionNamesFields: Bool
    /// The header lines' size as received, line breaks included: at least that of any subset of
    /// its fields written out again.
    public var byteCount: Int { bytes.count }

    /// A head from its lines, read once for what ``Facts`` gathers.
    init(status: Int, bytes: [UInt8]) {
        var facts = Facts()
        bytes.withUnsafeBufferPointer { buffer in
            Self.forEachLine(buffer) { start, end in facts.add(UnsafeBufferPointer(rebasing: buffer[start..<end])) }
        }
        self.init(status: status, bytes: bytes, facts: facts)
    }

    /// A head whose facts were gathered as its lines arrived (the client's header callback).
    init(status: Int, bytes: [UInt8], facts: Facts) {
        self.status = status
        self.bytes = bytes
        contentLength = facts.contentLength
        connectionNamesFields = facts.connectionNamesFields
    }

    /// What the proxy asks of every head, gathered line by line (no second pass over the head).
    struct Facts {
        private(set) var contentLength: Int?
        private(set) var connectionNamesFields = false
        private var lengthSeen = false

        /// One header line, without its line break.
        mutating func add(_ line: UnsafeBufferPointer<UInt8>) {
            // Both names start with `c` and take 11 bytes at least: most lines are told apart by
            // their first byte. Compared through the pointer (slices of the line cost more than
            // the comparison, on every line of every answer).
            guard line.count >= 11, let base = line.baseAddress, base[0] | 0x20 == UInt8(ascii: "c") else { return }
            if !lengthSeen, line.count > 15, FoldedPrefix.contentLength.starts(base) {
                lengthSeen = true
                contentLength = RawHead.decimal(UnsafeBufferPointer(start: base + 15, count: line.count - 15))
            } else if !connectionNamesFields, FoldedPrefix.connection.starts(base) {
                let value = UnsafeBufferPointer(start: base + 11, count: line.count - 11)
                RawHead.forEachListItem(value) { item in
                    if !HeaderLines.named(item, "keep-alive"), !HeaderLines.named(item, "close") { connectionNamesFields = true }
                }
            }
        }
    }

    /// A field name with its colon (8 to 16 bytes), compared with a line's start eight bytes at a
    /// time in any case: a letter's byte with its case bit set, every other byte as it is
    /// (byte by byte, the two names cost ~400 instructions per answer).
    struct FoldedPrefix {
        static let contentLength = FoldedPrefix("content-length:")
        static let connection = FoldedPrefix("connection:")

        let count: Int
        // The first eight bytes and the last eight (overlapping when shorter than 16), each with
        // the case bits of its letters.
        private let head: UInt64
        private let headCase: UInt64
        private let tail: UInt64
        private let tailCase: UInt64

        init(_ lowercase: StaticString) {
            count = lowercase.utf8CodeUnitCount
            precondition((8...16).contains(count), "a folded prefix takes 8 to 16 bytes")
            func word(at offset: Int) -> (UInt64, UInt64) {
                var value: UInt64 = 0
                var caseBits: UInt64 = 0
                for index in 0..<8 {
                    let byte = lowercase.utf8Start[offset + index]
                    value |= UInt64(byte) << (8 * UInt64(index))
                    if (0x61...0x7A).contains(byte) { caseBits |= 0x20 << (8 * UInt64(index)) }
                }
                return (value, caseBits)
            }
            (head, headCase) = word(at: 0)
            (tail, tailCase) = word(at: count - 8)
        }

        /// The `count` bytes at `base` spell the name in any case; the caller knows they are there.
        @inline(__always)
        func starts(_ base: UnsafePointer<UInt8>) -> Bool {
            let raw = UnsafeRawPointer(base)
            let first = UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
            let last = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
            return first | headCase == head && last | tailCase == tail
        }
    }

    /// Each item of a comma-separated field value (RFC 9110 §5.6.1), without the spaces and tabs
    /// around it; empty items are skipped.
    public static func forEachListItem(_ value: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        var start = 0
        while start < value.count {
            var end = start
            while end < value.count, value[end] != UInt8(ascii: ",") { end += 1 }
            var first = start
            var last = end
            while first < last, value[first] == 0x20 || value[first] == 0x09 { first += 1 }
            while last > first, value[last - 1] == 0x20 || value[last - 1] == 0x09 { last -= 1 }
            if first < last { body(UnsafeBufferPointer(rebasing: value[first..<last])) }
            start = end + 1
        }
    }

    /// Digits between spaces and tabs as a number; nil for anything else or more than 18 digits.
    private static func decimal(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
        var number = 0
        var digits = 0
        for byte in value where byte != 0x20 && byte != 0x09 {
            guard (0x30...0x39).contains(byte), digits < 18 else { return nil }
            number = number * 10 + Int(byte - 0x30)
            digits += 1
        }
        return digits > 0 ? number : nil
    }

    /// Header lines become fields; lines that are not `name: value` with a valid name are dropped.
    public func parse() -> HTTPResponse {
        var fields = HTTPFields()
        forEachField { name, value in
            if let fieldName = HTTPField.Name(String(decoding: name, as: UTF8.self)) {
                fields.append(HTTPField(name: fieldName, value: String(decoding: value, as: UTF8.self)))
            }
        }
        return HTTPResponse(status: .init(code: status), headerFields: fields)
    }

    /// Each `name: value` line, the value without surrounding spaces and tabs (lines without a
    /// colon are skipped; the name is not checked).
    public func forEachField(_ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void) {
        bytes.withUnsafeBufferPointer { buffer in
            Self.forEachLine(buffer) { lineStart, end in
                // `memchr` finds the line's end and its colon (the relay walks every answer's head).
                guard let colon = Self.find(0x3A, in: buffer, lineStart..<end) else { return }
                var valueStart = colon + 1
                while valueStart < end, buffer[valueStart] == 0x20 || buffer[valueStart] == 0x09 { valueStart += 1 }
                var valueEnd = end
                while valueEnd > valueStart, buffer[valueEnd - 1] == 0x20 || buffer[valueEnd - 1] == 0x09 { valueEnd -= 1 }
                body(
                    UnsafeBufferPointer(rebasing: buffer[lineStart..<colon]),
                    UnsafeBufferPointer(rebasing: buffer[valueStart..<valueEnd])
                )
            }
        }
    }

    /// Each line of `buffer` as its start and its end before CR or LF.
    private static func forEachLine(_ buffer: UnsafeBufferPointer<UInt8>, _ body: (_ start: Int, _ end: Int) -> Void) {
        var lineStart = 0
        while lineStart < buffer.count {
            let lineEnd = find(0x0A, in: buffer, lineStart..<buffer.count) ?? buffer.count
            var end = lineEnd
            while end > lineStart, buffer[end - 1] == 0x0D || buffer[end - 1] == 0x0A { end -= 1 }
            body(lineStart, end)
            lineStart = lineEnd + 1
        }
    }

    /// The first `byte` in `range` of `buffer`.
    private static func find(_ byte: UInt8, in buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, let base = buffer.baseAddress, let found = memchr(base + range.lowerBound, Int32(byte), range.count) else {
            return nil
        }
        return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
    }
}
