import HTTPTypes
import Synchronization
import TGHTTPClient
import TGHTTPServer

/// How the app's request body goes to the API.
///
/// `/api/{name}` routes stream their bodies (`RequestLimits.streamsBody`): the server reads a
/// body of known length up to ``Proxy/smallBody`` bytes whole, which is sent in one piece and can
/// be sent again (the retry after a 401 `invalid_token`); a larger one, or one of unknown length,
/// is passed on while it arrives, chunked when the app sent it chunked, so memory stays flat
/// whatever its size. Such a body can be sent only once.
struct ProxyUpload: Sendable {
    var body: HTTPClientRequestBody
    /// Whether the same body can be sent a second time: true when there is none, or it was read
    /// whole; false for a streamed body, which is gone once sent.
    var replayable: Bool
    /// Why the app's streamed body stopped before its end, if it did (set while it is sent).
    let failure: Failure?

    final class Failure: Sendable {
        private let error = Mutex<HTTPServerError?>(nil)

        func record(_ error: HTTPServerError) { self.error.withLock { $0 = $0 ?? error } }

        var value: HTTPServerError? { error.withLock { $0 } }
    }

    init(_ request: ServerRequest) {
        let method = request.method
        // A body is sent for POST, PUT and PATCH, and for other methods when there is one.
        let bodyMethod = method == .post || method == .put || method == .patch
        guard let stream = request.bodyStream else {
            body = request.body.isEmpty && !bodyMethod ? .none : .bytes(request.body)
            replayable = true
            failure = nil
            return
        }
        let chunked = request.fields.first(.transferEncoding)?.lowercased().contains("chunked") == true
        let length = chunked ? nil : request.fields.first(.contentLength).flatMap(Int.init)
        if !chunked, (length ?? 0) == 0 {
            body = bodyMethod ? .bytes([]) : .none
            replayable = true
            failure = nil
            return
        }
        let failure = Failure()
        body = .stream(length: length) { writer in
            do {
                for try await chunk in stream { try await writer.write(chunk) }
            } catch let error as HTTPServerError {
                failure.record(error)
                throw error
            }
        }
        replayable = false
        self.failure = failure
    }

    /// The error to answer when sending failed: the app's body's own failure if it had one (a
    /// body over `max_body_bytes` is 413), else what the API's side says.
    func error(sending error: HTTPClientError) -> ProxyError {
        switch failure?.value {
        case .some(let failure) where failure == .bodyTooLarge: .bodyTooLarge
        case .some: .bodyIncomplete
        case .none: error == .timeout ? .upstreamTimeout : .upstreamUnavailable
        }
    }
}
