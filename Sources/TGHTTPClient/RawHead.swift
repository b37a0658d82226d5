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

    init(status: Int, bytes: [UInt8]) {
        self.status = status
        self.bytes = bytes
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
                guard let colon = Self.find(0x3A, in: buffer, lineStart..<end) else { return true }
                var valueStart = colon + 1
                while valueStart < end, buffer[valueStart] == 0x20 || buffer[valueStart] == 0x09 { valueStart += 1 }
                var valueEnd = end
                while valueEnd > valueStart, buffer[valueEnd - 1] == 0x20 || buffer[valueEnd - 1] == 0x09 { valueEnd -= 1 }
                body(
                    UnsafeBufferPointer(rebasing: buffer[lineStart..<colon]),
                    UnsafeBufferPointer(rebasing: buffer[valueStart..<valueEnd])
                )
                return true
            }
        }
    }

    /// Each line of `buffer` as its start and its end before CR or LF, until `body` returns false.
    private static func forEachLine(_ buffer: UnsafeBufferPointer<UInt8>, _ body: (_ start: Int, _ end: Int) -> Bool) {
        var lineStart = 0
        while lineStart < buffer.count {
            let lineEnd = find(0x0A, in: buffer, lineStart..<buffer.count) ?? buffer.count
            var end = lineEnd
            while end > lineStart, buffer[end - 1] == 0x0D || buffer[end - 1] == 0x0A { end -= 1 }
            guard body(lineStart, end) else { return }
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

    /// The announced `Content-Length`, if there is one and it is well-formed.
    public var contentLength: Int? { Self.contentLength(in: bytes) }

    /// The `Content-Length` in raw header lines, if one is there and well-formed (scanned on the
    /// event thread without building fields). The first such line decides.
    static func contentLength(in bytes: [UInt8]) -> Int? {
        bytes.withUnsafeBufferPointer { buffer in
            let name: StaticString = "content-length:"
            var length: Int?
            forEachLine(buffer) { start, end in
                guard end - start > name.utf8CodeUnitCount,
                    HeaderLines.named(UnsafeBufferPointer(rebasing: buffer[start..<(start + name.utf8CodeUnitCount)]), name)
                else { return true }
                var value = 0
                var digits = 0
                for byte in buffer[(start + name.utf8CodeUnitCount)..<end] where byte != 0x20 && byte != 0x09 {
                    guard (0x30...0x39).contains(byte), digits < 18 else { return false }
                    value = value * 10 + Int(byte - 0x30)
                    digits += 1
                }
                if digits > 0 { length = value }
                return false
            }
            return length
        }
    }
}
