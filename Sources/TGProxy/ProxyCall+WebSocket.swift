import CoreMetrics
import HTTPTypes
import TGEventLoop
import TGHTTPClient
import TGHTTPServer

extension ProxyCall {
    /// A WebSocket call (docs/proxy.md, "WebSocket"): a connection to the API through libcurl,
    /// the upgrade request with the upstream token written on it, and on the API's 101 the app's
    /// own 101 with a relay that takes both connections over. The API's other answers are
    /// handled as any call's: a step-up challenge becomes `step_up_required`, a refused token
    /// one more try with a fresh one, anything else goes back to the app as it is.
    func openWebSocket(_ credential: ProxyCredential, fromMemory: Bool) {
        sentToken = credential.token
        holder = credential.holder
        self.fromMemory = fromMemory
        let client = upstream.clients[loop.index]
        UpstreamTunnel.open(scheme: upstream.scheme, authority: upstream.authority, configuration: client.configuration, loop: loop) {
            [self] result in
            switch result {
            case .failure(let error):
                responder.fail(upload.error(sending: error))
            case .success(let tunnel):
                upgrade(on: tunnel, token: credential.token)
            }
        }
    }

    private func upgrade(on tunnel: UpstreamTunnel, token: String) {
        guard
            let bytes = WebSocketHandshake.upstreamRequest(path: upstreamPath(), authority: upstream.authority, lines: requestLines(), token: token)
        else {
            tunnel.close()
            responder.fail(ProxyError.unusableToken)
            return
        }
        WebSocketOpening.start(tunnel: tunnel, request: bytes, timeout: .seconds(upstream.settings.timeoutSeconds)) { [self] outcome in
            switch outcome {
            case .failure(let error): responder.fail(error)
            case .success(let (head, rest)): answered(head, rest: rest, tunnel: tunnel)
            }
        }
    }

    private func answered(_ head: RawHead, rest: [UInt8], tunnel: UpstreamTunnel) {
        guard head.status == 101 else {
            tunnel.close()
            refused(head, body: rest)
            return
        }
        guard WebSocketHandshake.switched(head) else {
            tunnel.close()
            responder.fail(ProxyError.webSocketRefused("its 101 lacks Upgrade: websocket or Sec-WebSocket-Accept"))
            return
        }
        if fromMemory { proxy.metrics?.fromMemory.increment() } else { proxy.metrics?.loaded.increment() }
        let relay = WebSocketRelay(
            tunnel: tunnel,
            upstreamEarly: rest,
            hold: hold,
            loop: loop,
            idleTimeout: .seconds(upstream.settings.webSocketIdleSeconds)
        )
        var response = ServerResponse(status: .switchingProtocols, body: .upgrade(relay))
        // The API's fields (its accept value, subprotocol, extensions) but the hop-by-hop ones.
        ProxyHeaders.relay(head, location: nil, into: &response)
        response.headerFields[.upgrade] = "websocket"
        responder.respond(response)
    }

    /// The API answered the upgrade with something else than a 101.
    private func refused(_ head: RawHead, body: [UInt8]) {
        if head.status == 401, let challenge = StepUpChallenge.find(in: head) {
            responder.fail(ProxyError.stepUpRequired(challenge, upstream: upstream.settings.name, dpop: ProxyHeaders.presentsDPoP(request)))
            return
        }
        if head.status == 401, !retried, ProxyHeaders.saysInvalidToken(head) {
            // As any idempotent call: one fresh token and one more try.
            retried = true
            load(rejected: sentToken)
            return
        }
        var response = ServerResponse(status: HTTPResponse.Status(code: head.status), body: .bytes(body))
        ProxyHeaders.relay(head, location: upstream.location, into: &response)
        responder.respond(response)
    }
}
