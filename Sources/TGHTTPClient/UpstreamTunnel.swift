import CCurl
import CCurlShims
import HTTPTypes
public import TGEventLoop

/// A raw connection to an origin made by libcurl (`CURLOPT_CONNECT_ONLY`): TCP, and TLS for
/// https verified as any request of ``HTTPClient`` is, the same URL rules (plain http only to
/// loopback when allowed); then bytes both ways through `curl_easy_send` and `curl_easy_recv`,
/// on the loop, without blocking. For a protocol libcurl does not speak past its first bytes: a
/// WebSocket, once its upgrade request is written and its 101 read.
///
/// Each tunnel has a multi handle of its own, so its connection is never pruned or reused by
/// libcurl's pool for other transfers.
public final class UpstreamTunnel: @unchecked Sendable {
    // Invariant: used only on `loop` (opened there, and its reads, writes and close happen
    // there), so the easy handle is never used by two threads.
    public let loop: EventLoop
    /// The connection's socket (for the loop to watch; read and written only through this).
    public private(set) var socket: Int32 = -1
    /// TLS runs on it (https): read bytes may wait decrypted where the socket's readiness does not
    /// show them.
    public let isTLS: Bool
    private var client: HTTPClient?
    private var transfer: TunnelTransfer?

    /// What a read gave.
    public enum Read: Equatable, Sendable {
        case bytes(Int)
        /// Nothing now: wait for the socket to be readable.
        case wait
        /// The origin closed the connection.
        case end
        case failed
    }

    private init(loop: EventLoop, isTLS: Bool) {
        self.loop = loop
        self.isTLS = isTLS
    }

    /// Connects to `scheme://authority` with `configuration`'s connect timeout, CA file and
    /// loopback rule; `completion` runs on `loop` once (with the open tunnel, or why not).
    /// On `loop` only.
    public static func open(
        scheme: String,
        authority: String,
        configuration: HTTPClient.Configuration,
        loop: EventLoop,
        completion: @escaping (Result<UpstreamTunnel, HTTPClientError>) -> Void
    ) {
        var own = configuration
        own.maxConnections = 1
        own.maxConnectionsPerHost = 1
        let client = HTTPClient(configuration: own, loop: loop)
        let tunnel = UpstreamTunnel(loop: loop, isTLS: scheme.lowercased() == "https")
        do {
            let transfer = try TunnelTransfer(handles: client.handles)
            let request = HTTPRequest(method: .get, scheme: scheme, authority: authority, path: "/")
            try client.prepare(transfer, request, body: .none, timeout: configuration.connectTimeout)
            _ = CShims_curl_easy_setopt_long(transfer.easy, CURLOPT_CONNECT_ONLY, 1)
            transfer.connected = { [unowned transfer] error in
                if let error {
                    // After the harvest this runs in, not inside it.
                    loop.execute { client.shutdown() }
                    completion(.failure(error))
                    return
                }
                var socket: curl_socket_t = -1
                _ = CShims_curl_easy_getinfo_socket(transfer.easy, CURLINFO_ACTIVESOCKET, &socket)
                guard socket >= 0 else {
                    curl_multi_remove_handle(client.multi, transfer.easy)
                    loop.execute { client.shutdown() }
                    completion(.failure(HTTPClientError(.transport, detail: "no connection after connecting")))
                    return
                }
                // The tunnel's now: out of the client's epoll watch, which parked it; and the
                // client, with no transfer left to drive, leaves the loop's rounds.
                client.forgetSocket(socket)
                client.stopDriving()
                tunnel.socket = socket
                tunnel.client = client
                tunnel.transfer = transfer
                completion(.success(tunnel))
            }
            client.submit(.add(transfer))
        } catch {
            client.shutdown()
            completion(.failure(error as? HTTPClientError ?? HTTPClientError(.transport, detail: "\(error)")))
        }
    }

    /// Reads what arrived, up to `buffer.count` bytes.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Read {
        guard let transfer, let base = buffer.baseAddress, buffer.count > 0 else { return .failed }
        var count = 0
        switch curl_easy_recv(transfer.easy, base, buffer.count, &count) {
        case CURLE_OK: return count == 0 ? .end : .bytes(count)
        case CURLE_AGAIN: return .wait
        default: return .failed
        }
    }

    /// Writes what it can of `bytes` now: how many went (0: the socket is full, wait until it is
    /// writable), or nil when the connection failed.
    public func send(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let transfer, let base = bytes.baseAddress, bytes.count > 0 else { return transfer == nil ? nil : 0 }
        var count = 0
        switch curl_easy_send(transfer.easy, base, bytes.count, &count) {
        case CURLE_OK: return count
        case CURLE_AGAIN: return 0
        default: return nil
        }
    }

    /// Closes the connection (TLS with its close notify) and lets libcurl's handles go. The
    /// socket must no longer be watched. Idempotent.
    public func close() {
        guard let client, let transfer else { return }
        self.client = nil
        self.transfer = nil
        socket = -1
        // Removing a connect-only handle from its multi handle closes its connection; the handle
        // is not pooled again (CONNECT_ONLY stays set on it). The client stops after the current
        // event (which may be its own harvest).
        curl_multi_remove_handle(client.multi, transfer.easy)
        transfer.needsCommonOptions = true
        loop.execute { client.shutdown() }
    }

    deinit {
        close()
    }
}

/// A transfer that only connects, for ``UpstreamTunnel``; its handle is not pooled again.
final class TunnelTransfer: Transfer, @unchecked Sendable {
    // Invariant: as its superclass's; `connected` is set before the transfer is added and
    // called once, on the loop.
    var connected: ((HTTPClientError?) -> Void)?

    init(handles: EasyHandlePool) throws {
        try super.init(bufferLimit: 0, handles: handles)
    }

    override var keepsConnection: Bool { true }

    override func finish(_ result: CURLcode, error override: HTTPClientError? = nil) {
        stopSending()
        let callback = connected
        connected = nil
        callback?(outcome(result, override))
    }

    override func fail(_ error: HTTPClientError) {
        let callback = connected
        connected = nil
        callback?(error)
    }
}

extension HeaderLines {
    /// The lines as an HTTP/1.1 request head carries them (`Name: value` and CRLF each), for a
    /// request written on an ``UpstreamTunnel``.
    public var wireBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(storage.count + lineCount)
        for byte in storage {
            if byte == 0 {
                bytes.append(0x0D)
                bytes.append(0x0A)
            } else {
                bytes.append(byte)
            }
        }
        return bytes
    }
}

extension RawHead {
    /// A response head read off an ``UpstreamTunnel``: its status line (`HTTP/1.1 101 …`) and
    /// header lines, up to but not including the blank line. Nil when the status line is not one.
    public init?(wire: ArraySlice<UInt8>) {
        guard let lineEnd = wire.firstIndex(of: 0x0A) else { return nil }
        let line = wire[wire.startIndex..<lineEnd]
        guard line.starts(with: Array("HTTP/1.".utf8)), let space = line.firstIndex(of: 0x20), line.endIndex - space > 3 else { return nil }
        var status = 0
        for byte in line[(space + 1)..<(space + 4)] {
            guard (0x30...0x39).contains(byte) else { return nil }
            status = status * 10 + Int(byte - 0x30)
        }
        self.init(status: status, bytes: Array(wire[(lineEnd + 1)...]))
    }
}
