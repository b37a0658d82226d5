import HTTPTypes
import TGEventLoop

@testable import TGHTTPClient

/// A ``LoopExchange`` driven from a test's task: started on the client's loop, its head awaited,
/// its body read on the loop as it arrives, the way a server's response body reads it there
/// (``LoopExchange/read(into:)``, and ``LoopExchange/notify(when:)`` when it would wait).
final class ExchangeReader: @unchecked Sendable {
    // Invariant: `exchange` is used only on `client.loop` (every use below runs there).
    let client: HTTPClient
    let exchange: LoopExchange
    let head: HTTPResponse
    /// Whether the whole body was in when the head was handed over (see `wholeBodyUpTo`).
    let completeAtHead: Bool

    private init(client: HTTPClient, exchange: LoopExchange, head: HTTPResponse, completeAtHead: Bool) {
        self.client = client
        self.exchange = exchange
        self.head = head
        self.completeAtHead = completeAtHead
    }

    /// Starts `request` on `client`'s loop and returns once its head is in; throws what the
    /// exchange failed with before it.
    static func start(
        _ client: HTTPClient,
        _ request: HTTPRequest,
        body: HTTPClientRequestBody = .none,
        headTimeout: Duration = .seconds(10),
        idleTimeout: Duration,
        wholeBodyUpTo: Int = 0
    ) async throws -> ExchangeReader {
        var headers = HeaderLines()
        for field in request.headerFields {
            precondition(headers.append(name: field.name.rawName, value: field.value), "\(field.name)")
        }
        let loopRequest = LoopRequest(
            method: request.method.rawValue,
            scheme: request.scheme ?? "http",
            authority: request.authority ?? "",
            path: request.path ?? "/",
            headers: headers
        )
        return try await withCheckedThrowingContinuation { continuation in
            let accepted = client.loop.execute {
                do {
                    let exchange = try client.startOnLoop(
                        loopRequest,
                        body: body,
                        headTimeout: headTimeout,
                        idleTimeout: idleTimeout,
                        wholeBodyUpTo: wholeBodyUpTo
                    )
                    exchange.onHead = { [unowned exchange] result in
                        switch result {
                        case .success(let head):
                            let reader = ExchangeReader(client: client, exchange: exchange, head: head.parse(), completeAtHead: exchange.isComplete)
                            continuation.resume(returning: reader)
                        case .failure(let error):
                            continuation.resume(throwing: error)
                        }
                    }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            if !accepted { continuation.resume(throwing: HTTPClientError.shutDown) }
        }
    }

    /// The next piece of the body (at most `size` bytes, libcurl's read size by default), nil at
    /// its end; throws what the exchange failed with.
    func next(upTo size: Int = 16 * 1024) async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = client.loop.execute { self.read(upTo: size, continuation) }
            if !accepted { continuation.resume(throwing: HTTPClientError.shutDown) }
        }
    }

    /// The rest of the body (at most `limit` bytes).
    func collect(upTo limit: Int) async throws -> [UInt8] {
        var body: [UInt8] = []
        while let piece = try await next() {
            guard body.count + piece.count <= limit else {
                await cancel()
                throw HTTPClientError.responseTooLarge
            }
            body += piece
        }
        return body
    }

    /// Reads the whole body, pausing `pause` after every 16th piece, `stalls` times: a reader
    /// slower than an idle timeout. Returns the bytes read and the pauses made.
    func readStalling(_ stalls: Int, for pause: Duration) async throws -> (total: Int, stalls: Int) {
        var total = 0
        var reads = 0
        var made = 0
        while let piece = try await next() {
            total += piece.count
            reads += 1
            if reads % 16 == 0, made < stalls {
                made += 1
                try await Task.sleep(for: pause)
            }
        }
        return (total, made)
    }

    /// Stops the exchange, as a reader that goes away does.
    func cancel() async {
        await client.loop.run { self.exchange.cancel() }
    }

    /// Whether the body is all here (nothing more will arrive).
    var isComplete: Bool {
        get async { await client.loop.run { self.exchange.isComplete } }
    }

    /// On the loop.
    private func read(upTo size: Int, _ continuation: CheckedContinuation<[UInt8]?, any Error>) {
        var piece = [UInt8](repeating: 0, count: size)
        switch piece.withUnsafeMutableBytes({ exchange.read(into: $0) }) {
        case .bytes(let count):
            piece.removeSubrange(count...)
            continuation.resume(returning: piece)
        case .end:
            continuation.resume(returning: nil)
        case .failed(let error):
            continuation.resume(throwing: error)
        case .wait:
            exchange.notify { self.read(upTo: size, continuation) }
        }
    }
}
