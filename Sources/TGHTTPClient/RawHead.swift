import HTTPTypes

/// A response head as libcurl delivered it: the status and the header lines' bytes. Parsed on the
/// caller's task, so the event thread only copies bytes.
struct RawHead: Sendable {
    var status: Int
    var bytes: [UInt8]

    /// Header lines become fields; lines that are not `name: value` with a valid name are dropped.
    func parse() -> HTTPResponse {
        var fields = HTTPFields()
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
                    let name = String(decoding: UnsafeBufferPointer(rebasing: buffer[lineStart..<colon]), as: UTF8.self)
                    if let fieldName = HTTPField.Name(name) {
                        let value = String(decoding: UnsafeBufferPointer(rebasing: buffer[valueStart..<valueEnd]), as: UTF8.self)
                        fields.append(HTTPField(name: fieldName, value: value))
                    }
                }
                lineStart = lineEnd + 1
            }
        }
        return HTTPResponse(status: .init(code: status), headerFields: fields)
    }
}
