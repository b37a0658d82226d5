import CoreMetrics
import HTTPTypes
import TGAuth
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

// The cached proxied call, done on the connection's event loop (docs/architecture.md, "One loop
// per core"): session and upstream token from memory, the call on the loop's own libcurl
// client, the answer streamed back from the same loop. No task, no lock, no thread hop. Anything
// the memory cannot answer (a session or token to load or refresh, a streamed upload, the
// retry after a 401, a DPoP proof to check and record) takes the async path, `forward`.

extension ProxyRoutes {
    func forwardFromLoop(_ request: ServerRequest, _ info: RequestInfo, _ responder: RouteResponder) {
        do {
            let (upstream, target) = try route(request, info)
            guard request.bodyStream == nil, let loop = request.loop, loop.index < upstream.loopClients.count,
                case let presented = try AuthRoutes.presentedToken(request),
                let session = try auth.cachedSessionForAPI(accessToken: presented.value),
                session.account.provider == upstream.settings.provider,
                let token = auth.cachedUpstreamAccessToken(for: session, scopes: upstream.scopes)
            else {
                forwardAsync(request, info, responder)
                return
            }
            guard try DPoPGate.needsProof(session: session, token: presented, auth: auth) else {
                try sendFromLoop(request, info, responder, upstream: upstream, target: target, token: token, loop: loop)
                return
            }
            // A bound session's proof: its signature check and its record in the shared table
            // in a task, off the loop; then the call goes on from the loop as any cached one.
            Task {
                do {
                    try await DPoPGate.check(request, session: session, token: presented, auth: auth)
                    let queued = loop.execute {
                        do {
                            try self.sendFromLoop(request, info, responder, upstream: upstream, target: target, token: token, loop: loop)
                        } catch {
                            responder.fail(error)
                        }
                    }
                    if !queued { responder.fail(ProxyError.upstreamUnavailable) }
                } catch {
                    responder.fail(error)
                }
            }
        } catch {
            responder.fail(error)
        }
    }

    /// The cached call's exchange with the API, on `loop` (the request's), with `token`.
    private func sendFromLoop(
        _ request: ServerRequest,
        _ info: RequestInfo,
        _ responder: RouteResponder,
        upstream: Upstream,
        target: ProxyTarget,
        token: UpstreamAccessToken,
        loop: EventLoop
    ) throws {
        guard let bearer = ProxyHeaders.bearerLines(token) else {
            forwardAsync(request, info, responder)
            return
        }
        let method = request.method
        let client = upstream.loopClients[loop.index]
        let bodyMethod = method == .post || method == .put || method == .patch
        let timeout = Duration.seconds(upstream.settings.timeoutSeconds)
        let exchange = try client.startOnLoop(
            upstreamLoopRequest(request, to: upstream, target: target, bearer: bearer, info: info),
            body: request.body.isEmpty && !bodyMethod ? nil : request.body,
            headTimeout: timeout,
            idleTimeout: timeout,
            wholeBodyUpTo: Self.smallBody
        )
        let sentToken = token.value
        // The request and its info are the call's (`responder.call`): not captured again.
        exchange.onHead = { [unowned exchange] result in
            let head: RawHead
            switch result {
            case .success(let arrived): head = arrived
            case .failure(let error):
                responder.fail(error == .timeout ? ProxyError.upstreamTimeout : ProxyError.upstreamUnavailable)
                return
            }
            if head.status == 401, Self.idempotent.contains(method), Self.saysInvalidToken(head.parse()) {
                // The API refused a token that looked valid: the async path gets a fresh one
                // and tries once more (the request's body, if any, was read whole).
                exchange.cancel()
                self.forwardAsync(responder.call.request, responder.call.info, responder, rejected: sentToken)
                return
            }
            self.metrics?.proxyLoopCalls.increment()
            if upstream.settings.rewriteLinks, let rewrite = self.linkRewrites[upstream.settings.name] {
                Self.relayRewriting(head, exchange, method: method, rewrite: rewrite, location: rewrite.location, responder: responder)
                return
            }
            responder.respond(Self.relay(head, exchange, method: method, location: { self.locations[upstream.settings.name] }))
        }
    }

    /// The async path (`forward`) in a task of its own, answering through `responder`.
    func forwardAsync(_ request: ServerRequest, _ info: RequestInfo, _ responder: RouteResponder, rejected: String? = nil) {
        metrics?.proxyTaskCalls.increment()
        Task {
            do {
                responder.respond(try await forward(request, info, rejected: rejected))
            } catch {
                responder.fail(error)
            }
        }
    }

    /// The API's answer as it is: a small body already complete goes out in one piece, anything
    /// else is read from the exchange on the loop as it arrives. The fields go from libcurl's
    /// bytes to libmicrohttpd's without `HTTPFields` in between (``ProxyHeaders/relay(_:location:links:into:)``,
    /// the same rules as ``ProxyHeaders/response(_:)``); `links`: the API's `rewrite_links`, for
    /// its `Link` fields.
    static func relay(
        _ head: RawHead,
        _ exchange: LoopExchange,
        method: HTTPRequest.Method,
        location: () -> ProxyLocation?,
        links: ProxyLinkRewrite? = nil
    ) -> ServerResponse {
        var response = ServerResponse(status: HTTPResponse.Status(code: head.status))
        ProxyHeaders.relay(head, location: location, links: links, into: &response)
        if exchange.isComplete, method != .head {
            response.body = .bytes(exchange.takeAll())
        } else {
            // A body read as it arrives is as long as announced (HEAD: the length of a GET's).
            if let length = head.contentLength { response.headerFields[.contentLength] = String(length) }
            response.body = .source(ExchangeBody(exchange))
        }
        return response
    }
}

/// An upstream exchange as a response body, both on the same loop.
final class ExchangeBody: ResponseBodySource, @unchecked Sendable {
    // Invariant: used only on the loop of the exchange and the connection (the server calls a
    // source only there).
    let exchange: LoopExchange

    init(_ exchange: LoopExchange) {
        self.exchange = exchange
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> ResponseBodyRead {
        switch exchange.read(into: buffer) {
        case .bytes(let count): .bytes(count)
        case .wait: .wait
        case .end: .end
        case .failed: .failed
        }
    }

    func notify(when ready: @escaping () -> Void) {
        exchange.notify(when: ready)
    }

    func close() {
        if !exchange.isComplete { exchange.cancel() }
    }
}
