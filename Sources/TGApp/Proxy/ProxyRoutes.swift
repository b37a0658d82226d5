import Foundation
import HTTPTypes
import TGAuth
import TGBase
import TGEventLoop
import TGHTTPClient
import TGHTTPServer
public import TGProxy
import TGStore

/// `ANY /api/{upstream}/{path…}` (docs/proxy.md): the routes of the configured APIs, served by
/// ``Proxy`` (the `TGProxy` module) with the upstream tokens of `TGAuth` (``ProxyAccountTokens``).
enum ProxyRoutes {
    /// Adds the proxy's routes for `upstreams`. `loops`: the server's event loops; each API gets
    /// one client per loop (a call goes out on the loop of the app's connection). Without loops
    /// (an application driven in-process) the routes answer 502.
    static func add(
        to router: inout Router,
        upstreams configured: [TokenGateConfiguration.Upstream],
        loops: [EventLoop],
        upstreamTokens: UpstreamTokens,
        dpop: DPoPBinding,
        publicBaseURL: String,
        metrics: TokenGateMetrics? = nil,
        streams: OpenStreams = OpenStreams()
    ) {
        // Registered (and scraped) only when an API rewrites.
        let linkMetrics = configured.contains { $0.rewriteLinks } ? metrics.map { ProxyLinkRewrite.Metrics(factory: $0.factory) } : nil
        let upstreams = configured.compactMap { settings in
            ProxyUpstream(
                settings.proxySettings,
                loops: loops,
                credentials: ProxyAccountTokens(
                    tokens: upstreamTokens,
                    dpop: dpop,
                    provider: settings.provider,
                    scopes: UpstreamScopes(settings.scopes),
                    stepUpApart: settings.stepUpTokens == "separate" ? settings.name : nil
                ),
                publicBaseURL: publicBaseURL,
                linkMetrics: linkMetrics
            )
        }
        let proxy = Proxy(
            upstreams: upstreams,
            publicBaseURL: publicBaseURL,
            metrics: metrics.map { Proxy.Metrics(factory: $0.factory) },
            streams: streams
        )
        // Calls to an API take its body limit, and its timeout plus a margin so that the proxy's
        // own 504 answers first; their bodies stream to the API as they arrive (a small one of
        // known length is read whole). By name's bytes, the first of a name winning (as the
        // proxy's lookup).
        let limits = RouteLimits.byParameter(
            "upstream",
            configured.map { upstream in
                (
                    value: Array(upstream.name.utf8),
                    limits: HTTPServer.RequestLimits(
                        maxBodySize: upstream.maxBodyBytes,
                        requestTimeout: .seconds(upstream.timeoutSeconds + 5),
                        streamsBody: true,
                        buffersBodiesUpTo: Proxy.smallBody
                    )
                )
            }
        )
        for method in Proxy.methods {
            router.add(
                method,
                "/api/{upstream}/**",
                policy: RoutePolicy(limits: limits),
                .loop { request, info, responder in
                    proxy.forward(
                        request,
                        upstream: info.parameters["upstream"] ?? "",
                        rest: info.parameters["rest"] ?? "",
                        clientAddress: info.clientAddress,
                        requestID: info.requestID,
                        responder
                    )
                }
            )
        }
    }
}

extension RouteResponder: ProxyResponder {}

extension TokenGateConfiguration.Upstream {
    /// What the proxy takes of an API's settings.
    var proxySettings: ProxyUpstream.Settings {
        ProxyUpstream.Settings(
            name: name,
            baseURL: baseURL,
            methods: methods,
            pathPrefixes: pathPrefixes,
            headers: headers,
            timeoutSeconds: timeoutSeconds,
            connectTimeoutSeconds: connectTimeoutSeconds,
            maxConnections: maxConnections,
            caFile: caFile,
            rewriteLinks: rewriteLinks,
            rewriteMaxBodyBytes: rewriteMaxBodyBytes,
            webSocket: websocket,
            webSocketOrigins: websocketOrigins,
            webSocketIdleSeconds: websocketIdleTimeoutSeconds
        )
    }
}

/// The upstream token of a proxied call, for one API: the session the caller's TokenGate token
/// names (its DPoP binding honoured, ``DPoPGate``), of an account of the API's provider, and
/// that account's token for the API's scopes.
struct ProxyAccountTokens: ProxyCredentials {
    let tokens: UpstreamTokens
    let dpop: DPoPBinding
    let provider: String
    let scopes: UpstreamScopes
    /// The API's name when it keeps step-up tokens apart: a live one of the account's serves
    /// before the everyday token (``UpstreamTokens/cachedStepUpToken(account:resource:)``).
    var stepUpApart: String?

    func cached(for request: ServerRequest) throws -> ProxyCredential? {
        // On the header's bytes in place: the token becomes a string only for a proof's check.
        let memo = request.connectionMemo
        var presented: (hash: TokenHash, isDPoP: Bool)?
        try request.fields.withFirst(.authorization) { header in
            guard let (bounds, isDPoP) = AuthRoutes.tokenBounds(header) else { return }
            presented = (try Self.hash(UnsafeBufferPointer(rebasing: header[bounds]), memo: memo), isDPoP)
        }
        guard let (hash, isDPoP) = presented else { throw AuthRoutes.noToken }
        guard let (session, everyday) = tokens.cachedForAPI(hash: hash, provider: provider, scopes: scopes) else { return nil }
        var token = everyday
        if let stepUpApart {
            switch tokens.cachedStepUpToken(account: session.account.id, resource: stepUpApart) {
            case .unknown: return nil
            case .none: break
            case .token(let stepUp): token = stepUp
            }
        }
        guard try DPoPGate.needsProof(session: session, isDPoP: isDPoP, dpop: dpop) else { return credential(token, session: session) }
        // A bound session's proof: its signature check and its record in the shared table, in a
        // task off the loop, before the call goes.
        let presentedToken = try AuthRoutes.presentedToken(request)
        let dpop = dpop
        return credential(token, session: session) {
            try await DPoPGate.check(request, session: session, token: presentedToken, dpop: dpop)
        }
    }

    /// The hash of a presented token, from the connection's memo when its previous request
    /// presented the same bytes (a keep-alive app's every call), else checked and hashed and
    /// remembered. Only a pure function of the bytes is kept: the session is looked up anew.
    /// On the request's loop (``cached(for:)`` runs there), where the memo may be used.
    static func hash(_ token: UnsafeBufferPointer<UInt8>, memo: ConnectionMemo?) throws -> TokenHash {
        if let known = memo?.value(for: token) { return TokenHash(known) }
        let hash = try UpstreamTokens.hash(token)
        memo?.remember(hash.bytes, for: token)
        return hash
    }

    func load(for request: ServerRequest, rejected: String?) async throws -> ProxyCredential {
        let presented = try AuthRoutes.presentedToken(request)
        let session = try await tokens.authenticateForAPI(accessToken: String(presented.value))
        // A call whose token the API refused had its proof checked (and recorded) already.
        if rejected == nil { try await DPoPGate.check(request, session: session, token: presented, dpop: dpop) }
        guard session.account.provider == provider else {
            throw AuthProblem(
                .wrongProvider,
                "This API takes accounts of provider \(provider); this token's account is of \(session.account.provider)."
            )
        }
        if let stepUpApart, let stepUp = try await tokens.stepUpToken(account: session.account.id, resource: stepUpApart, rejected: rejected) {
            return credential(stepUp, session: session)
        }
        return credential(try await tokens.upstreamAccessToken(for: session, scopes: scopes.scopes, rejected: rejected), session: session)
    }

    /// `token` with its header line, for a call of `session` (whose end ends the call's stream).
    private func credential(
        _ token: UpstreamAccessToken,
        session: SessionContext,
        check: (@Sendable () async throws -> Void)? = nil
    ) -> ProxyCredential {
        ProxyCredential(
            token: token.value,
            bearer: Self.bearer(token),
            check: check,
            holder: StreamHolder(session: session.sessionID, validUntil: session.expiresAt)
        )
    }

    /// `token`'s `Authorization` line, made once per token (``UpstreamAccessToken/memo``) and
    /// shared by every call that sends it; empty for a token that cannot be a field value.
    static func bearer(_ token: UpstreamAccessToken) -> SharedHeaderLines {
        token.memo.value { ProxyHeaders.bearerLines(token.value) }
    }
}
