public import HTTPTypes

/// A response whose body arrives as it is read. Reading slowly pauses the transfer (no unbounded
/// buffering); dropping the response or calling ``cancel()`` ends the transfer.
public final class HTTPClientStreamingResponse: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    public let head: HTTPResponse
    let channel: BodyChannel
    let transfer: Transfer
    let client: HTTPClient

    init(head: HTTPResponse, channel: BodyChannel, transfer: Transfer, client: HTTPClient) {
        self.head = head
        self.channel = channel
        self.transfer = transfer
        self.client = client
    }

    deinit {
        client.cancel(transfer)
    }

    /// Ends the transfer now; the body stops (reads then fail with ``HTTPClientError/cancelled``).
    public func cancel() {
        client.cancel(transfer)
    }

    /// Reads the whole remaining body (at most `limit` bytes).
    public func collect(upTo limit: Int) async throws -> [UInt8] {
        var body: [UInt8] = []
        for try await chunk in self {
            guard body.count + chunk.count <= limit else {
                cancel()
                throw HTTPClientError.responseTooLarge
            }
            body += chunk
        }
        return body
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let response: HTTPClientStreamingResponse

        public mutating func next() async throws -> [UInt8]? {
            let response = self.response
            return try await withTaskCancellationHandler {
                try await response.channel.next()
            } onCancel: {
                response.cancel()
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(response: self) }
}
