public import CoreMetrics
import Foundation
public import HTTPTypes
import TGEventLoop
import TGHTTPClient
public import TGHTTPServer

/// `ANY /api/{upstream}/{path…}` (docs/proxy.md): the call goes to the configured API only, with
/// the upstream access token its credentials give (``ProxyCredentials``) instead of the app's
/// own, and the answer streams back as the API gave it.
///
/// One path for every call, on the event loop of the app's connection (docs/architecture.md,
/// "One loop per core"): the token from memory when it is there, else loaded in a task that then
/// comes back to the loop; the request on that loop's client for the API; the answer relayed
/// from the same loop. A streamed upload goes the same way, and the retry after the API's 401
/// `invalid_token` is "a fresh token, then round again".
public final class Proxy: Sendable {
    public static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]
    static let idempotent: Set<HTTPRequest.Method> = [.get, .head, .options, .put, .delete]

    /// Bodies that announce at most this many bytes are read whole: an API's answer before
    /// answering (one write, no suspension of the app's connection per chunk), an app's upload
    /// by the server before the call (``ProxyUpload``); larger or unannounced ones stream.
    public static let smallBody = 64 * 1024

    let upstreams: [String: ProxyUpstream]
    /// The same in a list: a handful of APIs is found faster by comparing names than by hashing
    /// one (every call looks its API up).
    private let upstreamList: [ProxyUpstream]
    /// `X-Forwarded-Proto` and `-Host`: scheme and host of TokenGate's public base URL.
    let forwardedLines: HeaderLines
    let metrics: Metrics?
    /// The streamed answers open now, by session: they end when their session does.
    public let streams: OpenStreams

    /// `tokengate_proxy_calls_total` by where the call's token came from: `loop` (memory, on the
    /// loop) or `task` (loaded or refreshed in a task first).
    public struct Metrics: Sendable {
        let fromMemory: CoreMetrics.Counter
        let loaded: CoreMetrics.Counter

        public init(factory: any MetricsFactory) {
            fromMemory = CoreMetrics.Counter(label: "tokengate_proxy_calls_total", dimensions: [("path", "loop")], factory: factory)
            loaded = CoreMetrics.Counter(label: "tokengate_proxy_calls_total", dimensions: [("path", "task")], factory: factory)
        }
    }

    public init(upstreams: [ProxyUpstream], publicBaseURL: String, metrics: Metrics?, streams: OpenStreams = OpenStreams()) {
        // The first of a name wins.
        self.upstreams = Dictionary(upstreams.map { ($0.settings.name, $0) }, uniquingKeysWith: { first, _ in first })
        upstreamList = upstreams
        let base = URLComponents(string: publicBaseURL)
        let host = base.map { components in components.port.map { "\(components.host ?? ""):\($0)" } ?? components.host ?? "" } ?? ""
        forwardedLines = ProxyHeaders.forwardedLines(proto: base?.scheme ?? "http", host: host)
        self.metrics = metrics
        self.streams = streams
    }

    /// Forwards one call, on the request's loop; answers through `responder`. `rest`: the path
    /// after `/api/{upstream}/`, as the app sent it.
    public func forward(
        _ request: ServerRequest,
        upstream name: String,
        rest: String,
        clientAddress: String?,
        requestID: String,
        _ responder: any ProxyResponder
    ) {
        do {
            let (upstream, target) = try route(request, upstream: name, rest: rest)
            // A call that came without a loop (an application driven in-process, as tests do)
            // goes out on the first loop's client, from that loop.
            guard let loop = request.loop ?? upstream.clients.first?.loop, loop.index < upstream.clients.count else {
                throw ProxyError.upstreamUnavailable
            }
            guard loop.inEventLoop else {
                let queued = loop.execute {
                    self.forward(request, upstream: name, rest: rest, clientAddress: clientAddress, requestID: requestID, responder)
                }
                if !queued { throw ProxyError.upstreamUnavailable }
                return
            }
            // A WebSocket's handshake is checked before any credential is loaded.
            let webSocket = WebSocketHandshake.isRequested(request)
            if webSocket { try WebSocketHandshake.check(request, upstream: upstream.settings) }
            let call = ProxyCall(
                proxy: self,
                request: request,
                upstream: upstream,
                target: target,
                clientAddress: clientAddress,
                requestID: requestID,
                responder: responder,
                loop: loop,
                webSocket: webSocket
            )
            guard let credential = try upstream.credentials.cached(for: request) else {
                call.load(rejected: nil)
                return
            }
            call.send(credential, fromMemory: true)
        } catch {
            responder.fail(error)
        }
    }

    /// The configured API and the checked path of a call, or why it is refused (unknown API,
    /// method or path not allowed).
    func route(_ request: ServerRequest, upstream name: String, rest: String) throws -> (ProxyUpstream, ProxyTarget) {
        guard let upstream = upstream(named: name) else { throw ProxyError.unknownUpstream }
        guard upstream.methods.contains(request.method) else { throw ProxyError.methodNotAllowed(allowed: upstream.settings.methods) }
        let target = try ProxyTarget(rest: rest)
        guard target.isAllowed(byBare: upstream.barePrefixes) else { throw ProxyError.pathNotAllowed }
        return (upstream, target)
    }

    public func upstream(named name: String) -> ProxyUpstream? {
        guard upstreamList.count <= 16 else { return upstreams[name] }
        return upstreamList.first { $0.settings.name == name }
    }
}
