import HTTPTypes
import Synchronization
import TGHTTPClient
import TGHTTPServer

/// How the app's request body goes to the API.
///
/// `/api/{name}` routes stream their bodies (`RequestLimits.streamsBody`): a body of unknown
/// length or of more than ``ProxyRoutes/smallBody`` bytes is passed on while it arrives, chunked
/// when the app sent it chunked, so memory stays flat whatever its size. Such a body can be sent
/// only once. A small body of known length is read whole first (by the server, which streams
/// only bodies above ``ProxyRoutes/smallBody``): it can be sent again, and one write is cheaper
/// than a stream.
struct ProxyUpload: Sendable {
    var body: HTTPClientRequestBody
    /// Whether the same body can be sent a second time (the retry after a 401 `invalid_token`):
    /// true when there is none, or it was read whole; false for a streamed body, which is gone
    /// once sent.
    var replayable: Bool
    /// Why the app's body stopped before its end, if it did (set while a streamed body is sent).
    let failure = Failure()

    final class Failure: Sendable {
        private let error = Mutex<HTTPServerError?>(nil)

        func record(_ error: HTTPServerError) { self.error.withLock { $0 = $0 ?? error } }

        var value: HTTPServerError? { error.withLock { $0 } }
    }

    static func make(_ request: ServerRequest) async throws -> ProxyUpload {
        let method = request.method
        // A body is sent for POST, PUT and PATCH, and for other methods when there is one.
        let bodyMethod = [.post, .put, .patch].contains(method)
        guard let stream = request.bodyStream else {
            return ProxyUpload(body: request.body.isEmpty && !bodyMethod ? .none : .bytes(request.body), replayable: true)
        }
        let chunked = request.fields.first(.transferEncoding)?.lowercased().contains("chunked") == true
        let length = chunked ? nil : request.fields.first(.contentLength).flatMap(Int.init)
        if !chunked, (length ?? 0) == 0 {
            return ProxyUpload(body: bodyMethod ? .bytes([]) : .none, replayable: true)
        }
        if let length, length <= ProxyRoutes.smallBody {
            do {
                return ProxyUpload(body: .bytes(try await stream.collect(upTo: length)), replayable: true)
            } catch let error as HTTPServerError {
                throw error == .bodyTooLarge ? ProxyError.bodyTooLarge : ProxyError.bodyIncomplete
            }
        }
        var upload = ProxyUpload(body: .none, replayable: false)
        let failure = upload.failure
        upload.body = .stream(length: length) { writer in
            do {
                for try await chunk in stream { try await writer.write(chunk) }
            } catch let error as HTTPServerError {
                failure.record(error)
                throw error
            }
        }
        return upload
    }

    /// The error to answer when sending failed: the app's body's own failure if it had one (a
    /// body over `max_body_bytes` is 413), else what the API's side says.
    func error(sending error: HTTPClientError) -> ProxyError {
        switch failure.value {
        case .some(let failure) where failure == .bodyTooLarge: .bodyTooLarge
        case .some: .bodyIncomplete
        case .none: error == .timeout ? .upstreamTimeout : .upstreamUnavailable
        }
    }
}
