import CMicroHTTPD
import CMicroHTTPDShims
import HTTPTypes
import TGBase

// Turning a `ServerResponse` into a libmicrohttpd response, on the connection's thread.

/// Content reader for streamed bodies: called on the connection's thread.
let streamReaderCallback: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafeMutablePointer<CChar>?, Int) -> Int = {
    streamPointer,
    _,
    buffer,
    capacity in
    let stream = Unmanaged<ResponseStream>.fromOpaque(streamPointer!).takeUnretainedValue()
    guard let buffer else { return ResponseStream.endWithError }
    return stream.read(into: buffer, capacity: capacity)
}

/// The response was destroyed: release the stream and tell its producer.
let streamFreeCallback: @convention(c) (UnsafeMutableRawPointer?) -> Void = { streamPointer in
    let stream = Unmanaged<ResponseStream>.fromOpaque(streamPointer!).takeRetainedValue()
    stream.close()
}

extension HTTPServer {
    /// Queues `response`. `Content-Length`, `Transfer-Encoding` and `Connection` are the server's
    /// to set; a handler's values for them are ignored.
    func queue(_ response: ServerResponse, on connection: OpaquePointer, context: RequestContext) -> MHD_Result {
        let daemon = context.daemon
        // Most answers' heads are small: only a larger one is measured against the room (one that
        // small finds none only beside a request head that leaves no room for any answer).
        let headSize = response.headSize
        if headSize > 1024 {
            let room = answerHeadRoom(connection, context)
            if headSize > room, let refusal = Self.answerHeadTooLarge(size: headSize, room: room) {
                configuration.diagnosticsSink?("an answer's head (\(headSize) bytes) did not fit the connection's memory (room for \(room))")
                return queue(refusal, on: connection, context: context)
            }
        }
        let mhdResponse: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            mhdResponse = bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(
                    raw.count,
                    UnsafeMutableRawPointer(mutating: raw.baseAddress),
                    MHD_ResponseMemoryMode.RESPMEM_MUST_COPY
                )
            }
        case .stream(let produce):
            let stream = ResponseStream(connection: connection, daemon: daemon)
            // A declared length is sent as Content-Length (the producer must write exactly that);
            // otherwise the body is chunked.
            let length = response.headerFields[.contentLength].flatMap { UInt64($0) } ?? UInt64.max
            mhdResponse = MHD_create_response_from_callback(
                length,
                32 * 1024,
                streamReaderCallback,
                Unmanaged.passRetained(stream).toOpaque(),
                streamFreeCallback
            )
            if mhdResponse != nil {
                let writer = ResponseBodyWriter(stream: stream)
                Task {
                    do {
                        try await produce(writer)
                        stream.end(failed: false)
                    } catch {
                        stream.end(failed: true)
                    }
                }
            }
        case .source(let source):
            let reader = SourceReader(source: source, daemon: daemon, connection: connection)
            let length = response.headerFields[.contentLength].flatMap { UInt64($0) } ?? UInt64.max
            mhdResponse = MHD_create_response_from_callback(
                length,
                32 * 1024,
                sourceReaderCallback,
                Unmanaged.passRetained(reader).toOpaque(),
                sourceFreeCallback
            )
            if mhdResponse == nil { source.close() }
        case .upgrade(let handler):
            guard configuration.allowsUpgrade, response.status == .switchingProtocols else {
                handler.abandoned()
                configuration.diagnosticsSink?("an upgrade answer was refused: upgrades are not allowed, or its status is not 101")
                let refusal = Self.problem(.internalServerError, "internal_error", "The server could not switch protocols.")
                return queue(refusal, on: connection, context: context)
            }
            mhdResponse = MHD_create_response_for_upgrade(upgradeCallback, Unmanaged.passUnretained(daemon).toOpaque())
            if mhdResponse != nil {
                daemon.pendingUpgrades[WordKey(Unmanaged.passUnretained(context).toOpaque())] = handler
            } else {
                handler.abandoned()
            }
        }
        guard let mhdResponse else { return MHD_Result.NO }
        defer { MHD_destroy_response(mhdResponse) }
        for field in response.headerFields {
            switch field.name {
            case .contentLength, .transferEncoding, .connection: continue
            default:
                // Explicit withCString: implicit String-to-pointer bridging copies into a new array.
                _ = field.name.rawName.withCString { name in
                    field.value.withCString { value in MHD_add_response_header(mhdResponse, name, value) }
                }
            }
        }
        response.rawHeaderFields.forEachField { name, value in _ = MHD_add_response_header(mhdResponse, name, value) }
        if var requestID = response.requestID, requestID.withUTF8(RawHeaderFields.isSafeValue) {
            _ = "X-Request-ID".withCString { name in requestID.withCString { MHD_add_response_header(mhdResponse, name, $0) } }
        }
        return MHD_queue_response(connection, UInt32(response.status.code), mhdResponse)
    }

    static let bodyTooLarge = problem(
        .contentTooLarge,
        "body_too_large",
        "The request body is larger than this server accepts."
    )

    /// A small RFC 9457 problem document, for answers the server gives on its own.
    static func problem(_ status: HTTPResponse.Status, _ code: String, _ detail: String) -> ServerResponse {
        let body = #"{"type":"about:blank","title":"\#(status.reasonPhrase)","status":\#(status.code),"code":"\#(code)","detail":"\#(detail)"}"#
        return ServerResponse(status: status, contentType: "application/problem+json", body: body)
    }
}
