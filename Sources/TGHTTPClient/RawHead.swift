public import HTTPTypes

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
        var lineStart = 0
        let count = bytes.count
        bytes.withUnsafeBufferPointer { buffer in
            while lineStart < count {
                var lineEnd = lineStart
                while lineEnd < count, buffer[lineEnd] != 0x0A { lineEnd += 1 }
                var end = lineEnd
                while end > lineStart, buffer[end - 1] == 0x0D || buffer[end - 1] == 0x0A { end -= 1 }
                if let colon = buffer[lineStart..<end].firstIndex(of: 0x3A) {
                    var valueStart = colon + 1
                    while valueStart < end, buffer[valueStart] == 0x20 || buffer[valueStart] == 0x09 { valueStart += 1 }
                    var valueEnd = end
                    while valueEnd > valueStart, buffer[valueEnd - 1] == 0x20 || buffer[valueEnd - 1] == 0x09 { valueEnd -= 1 }
                    body(
                        UnsafeBufferPointer(rebasing: buffer[lineStart..<colon]),
                        UnsafeBufferPointer(rebasing: buffer[valueStart..<valueEnd])
                    )
                }
                lineStart = lineEnd + 1
            }
        }
    }

    /// The announced `Content-Length`, if there is one and it is well-formed.
    public var contentLength: Int? { Self.contentLength(in: bytes) }

    private static let contentLengthName = Array("content-length:".utf8)

    /// The `Content-Length` in raw header lines, if one is there and well-formed (scanned on the
    /// event thread without building fields).
    static func contentLength(in bytes: [UInt8]) -> Int? {
        let name = contentLengthName
        var lineStart = 0
        while lineStart < bytes.count {
            let lineEnd = bytes[lineStart...].firstIndex(of: 0x0A) ?? bytes.count
            if lineEnd - lineStart > name.count,
                zip(bytes[lineStart...], name).allSatisfy({ (0x41...0x5A).contains($0) ? $0 | 0x20 == $1 : $0 == $1 })
            {
                var value = 0
                var digits = 0
                for byte in bytes[(lineStart + name.count)..<lineEnd] where byte != 0x20 && byte != 0x09 && byte != 0x0D {
                    guard (0x30...0x39).contains(byte), digits < 18 else { return nil }
                    value = value * 10 + Int(byte - 0x30)
                    digits += 1
                }
                return digits > 0 ? value : nil
            }
            lineStart = lineEnd + 1
        }
        return nil
    }
}
