import CMicroHTTPD
import CMicroHTTPDShims
import HTTPTypes
import TGBase

#if canImport(Glibc)
import Glibc
#endif

// An answer's head must fit the connection's memory. libmicrohttpd builds it in the same block
// (`connectionMemoryLimit`) where the request's head still lies, parsed in place, with a record
// for each of its fields, query arguments and cookies; when the answer's head does not fit, it
// closes the connection without a word, after the handler ran and whatever it logged. So the room
// is worked out when the head arrives (`ServerRequest.answerHeadRoom`), and an answer that would
// not fit is replaced by a short error that does (docs/operations.md, "Request heads near the
// connection memory").

extension HTTPServer {
    /// A parsed field, query argument or cookie in the connection's memory: libmicrohttpd 0.9.75's
    /// `struct MHD_HTTP_Header` (six pointer-sized members and the kind, 56 bytes), rounded up to
    /// its pool's 16-byte alignment.
    static let recordSize = 64
    /// What an answer's head may need besides its status line and fields, and what the request
    /// may still hold: `Date` (37 bytes), `Content-Length` (up to 38) or `Transfer-Encoding`
    /// (28), `Connection: close` (19), the blank line, alignment, and a few bytes of a pipelined
    /// request already read.
    static let answerHeadReserve = 384

    /// Less room than this for an answer's head, and the handler does not run: its answer could
    /// not be sent (libmicrohttpd would close the connection without one after the handler's
    /// work was done), so ``headLeavesNoRoom`` goes out instead, which needs less than the
    /// reserve. TokenGate's own answers take 150 to 300 bytes.
    static let smallestAnswerRoom = 512

    /// A request whose head leaves too little room for any answer's (``smallestAnswerRoom``).
    static let headLeavesNoRoom = problem(
        .requestHeaderFieldsTooLarge,
        "head_too_large",
        "The request's head leaves no room for an answer in the connection's memory; send a shorter request."
    )

    /// The bytes an answer's head may take on `connection`, whose request's head has arrived:
    /// its fields are counted already (`context.fields`; those whose name is not a token are not
    /// among them, and the reserve covers a few), libmicrohttpd is asked for the query arguments
    /// and cookies only when there are any.
    func answerHeadRoom(_ connection: OpaquePointer, _ context: RequestContext) -> Int {
        let head = CShims_MHD_request_header_size(connection)
        func count(_ kind: MHD_ValueKind) -> Int { Int(max(0, MHD_get_connection_values_n(connection, kind, nil, nil))) }
        let hasQuery = context.target.withUTF8Bytes { bytes in
            bytes.baseAddress.map { memchr($0, Int32(UInt8(ascii: "?")), bytes.count) != nil } ?? false
        }
        let arguments = hasQuery ? count(.GET_ARGUMENT_KIND) : 0
        let records = context.fields.count + arguments + (context.fields.hasCookieField ? count(.COOKIE_KIND) : 0)
        return connectionMemory - head - records * Self.recordSize - Self.answerHeadReserve
    }

    /// Each connection's memory as libmicrohttpd is given it (at least 8 KiB).
    var connectionMemory: Int { max(8 * 1024, configuration.connectionMemoryLimit) }

    /// What goes out instead of an answer whose head (`size` bytes) is larger than `room`: a
    /// short 500 that says so (a handler's answer that libmicrohttpd could not send; a proxy checks
    /// an API's answer before this). Nil when even that does not fit: a request whose own head
    /// leaves no room for any answer is closed either way.
    static func answerHeadTooLarge(size: Int, room: Int) -> ServerResponse? {
        let refusal = problem(
            .internalServerError,
            "answer_head_too_large",
            "The answer's header fields (\(size) bytes) do not fit the connection's memory beside this request's (room for \(max(0, room)))."
        )
        return refusal.headSize <= room ? refusal : nil
    }
}

extension ServerResponse {
    /// The size of the head as libmicrohttpd writes it (status line, `Name: value` lines and the
    /// request id), without what the server adds itself (``HTTPServer/answerHeadReserve``).
    public var headSize: Int {
        // "HTTP/1.1 200 " and the reason, then each field's name, ": ", value and CRLF.
        var size = 13 + status.reasonPhrase.utf8.count + 2
        for field in headerFields { size += field.name.rawName.utf8.count + field.value.utf8.count + 4 }
        size += rawHeaderFields.lineBytes
        if let requestID { size += 16 + requestID.utf8.count }
        return size
    }
}
