import Foundation
import HTTPTypes
import TGAuth
import TGHTTPClient
import TGHTTPServer

/// `ANY /api/{upstream}/{path…}` (docs/proxy.md): the caller's TokenGate access token is
/// swapped for the upstream access token of its account and the call goes to the configured API
/// only; the answer streams back as the API gave it.
final class ProxyRoutes: Sendable {
    /// A configured API and the HTTP client of its own (one slow API cannot take another's
    /// connections).
    final class Upstream: Sendable {
        let settings: TokenGateConfiguration.Upstream
        let client: HTTPClient
        /// One client per event loop of the server, by loop index: a call served on a loop goes
        /// out on that loop's client (the cached path, ProxyRoutes+Loop.swift). Empty: none.
        let loopClients: [HTTPClient]
        let scheme: String
        let authority: String
        /// The base URL's path without its trailing `/`.
        let basePath: String
        /// The configured `headers`, parsed, and as header lines.
        let extraFields: HTTPFields
        let extraLines: HeaderLines
        /// The configured `methods`, parsed (checked on every call without building strings).
        let methods: [HTTPRequest.Method]
        /// The configured `scopes` with their token cache key.
        let scopes: UpstreamScopes
        /// The configured `path_prefixes` without their trailing `/` (``ProxyTarget/bare(_:)``).
        let barePrefixes: [String]

        init?(_ settings: TokenGateConfiguration.Upstream, client: HTTPClient, loopClients: [HTTPClient] = []) {
            guard let url = URLComponents(string: settings.baseURL), let scheme = url.scheme, let host = url.host else { return nil }
            self.settings = settings
            self.client = client
            self.loopClients = loopClients
            self.scheme = scheme.lowercased()
            authority = url.port.map { "\(url.percentEncodedHost ?? host):\($0)" } ?? (url.percentEncodedHost ?? host)
            basePath = url.percentEncodedPath.hasSuffix("/") ? String(url.percentEncodedPath.dropLast()) : url.percentEncodedPath
            extraFields = ProxyHeaders.extraFields(settings.headers)
            extraLines = ProxyHeaders.lines(extraFields)
            methods = settings.methods.compactMap { HTTPRequest.Method($0) }
            scopes = UpstreamScopes(settings.scopes)
            barePrefixes = settings.pathPrefixes.map(ProxyTarget.bare)
        }
    }

    static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]
    static let idempotent: Set<HTTPRequest.Method> = [.get, .head, .options, .put, .delete]

    let upstreams: [String: Upstream]
    /// The same in a list: a handful of APIs is found faster by comparing names than by hashing
    /// one (every call looks its API up).
    private let upstreamList: [Upstream]
    let auth: AuthService
    /// Scheme and host of TokenGate's public base URL (`X-Forwarded-Proto`, `X-Forwarded-Host`).
    let publicScheme: String
    let publicHost: String
    /// Both as the cached path's header lines.
    let forwardedLines: HeaderLines
    /// Per API, how its own `Location`s become TokenGate's.
    let locations: [String: ProxyLocation]
    /// Per API with `rewrite_links`, how the links in its answers become TokenGate's (looked up
    /// only for an API whose setting is on).
    let linkRewrites: [String: ProxyLinkRewrite]
    /// `tokengate_proxy_calls_total` by path, when metrics are on.
    let metrics: TokenGateMetrics?

    init(
        upstreams: [String: Upstream],
        auth: AuthService,
        publicScheme: String,
        publicHost: String,
        locations: [String: ProxyLocation],
        linkRewrites: [String: ProxyLinkRewrite] = [:],
        metrics: TokenGateMetrics?
    ) {
        self.upstreams = upstreams
        upstreamList = Array(upstreams.values)
        self.auth = auth
        self.publicScheme = publicScheme
        self.publicHost = publicHost
        forwardedLines = ProxyHeaders.forwardedLines(proto: publicScheme, host: publicHost)
        self.locations = locations
        self.linkRewrites = linkRewrites
        self.metrics = metrics
    }

    static func add(
        to router: inout Router,
        upstreams: [Upstream],
        auth: AuthService,
        publicBaseURL: String,
        metrics: TokenGateMetrics? = nil
    ) {
        let base = URLComponents(string: publicBaseURL)
        let locations = Dictionary(
            upstreams.compactMap { upstream in
                ProxyLocation(baseURL: upstream.settings.baseURL, name: upstream.settings.name, publicBaseURL: publicBaseURL).map {
                    (upstream.settings.name, $0)
                }
            },
            uniquingKeysWith: { first, _ in first }
        )
        // Registered (and scraped) only when an API rewrites.
        let rewriteMetrics = upstreams.contains { $0.settings.rewriteLinks } ? metrics.map { ProxyLinkRewrite.Metrics(factory: $0.factory) } : nil
        let linkRewrites = Dictionary(
            upstreams.compactMap { upstream -> (String, ProxyLinkRewrite)? in
                guard upstream.settings.rewriteLinks, let location = locations[upstream.settings.name] else { return nil }
                let rewrite = ProxyLinkRewrite(location: location, maxBodyBytes: upstream.settings.rewriteMaxBodyBytes, metrics: rewriteMetrics)
                return (upstream.settings.name, rewrite)
            },
            uniquingKeysWith: { first, _ in first }
        )
        let routes = ProxyRoutes(
            upstreams: Dictionary(upstreams.map { ($0.settings.name, $0) }, uniquingKeysWith: { first, _ in first }),
            auth: auth,
            publicScheme: base?.scheme ?? "http",
            publicHost: base.map { components in components.port.map { "\(components.host ?? ""):\($0)" } ?? components.host ?? "" } ?? "",
            locations: locations,
            linkRewrites: linkRewrites,
            metrics: metrics
        )
        // Calls to an API take its body limit, and its timeout plus a margin so that the proxy's
        // own 504 answers first; their bodies stream to the API as they arrive (ProxyUpload).
        // By name's bytes, the first of a name winning (as the proxy's lookup).
        let limits = RouteLimits.byParameter(
            "upstream",
            upstreams.map { upstream in
                (
                    value: Array(upstream.settings.name.utf8),
                    limits: HTTPServer.RequestLimits(
                        maxBodySize: upstream.settings.maxBodyBytes,
                        requestTimeout: .seconds(upstream.settings.timeoutSeconds + 5),
                        streamsBody: true,
                        buffersBodiesUpTo: smallBody
                    )
                )
            }
        )
        for method in methods {
            router.add(
                method,
                "/api/{upstream}/**",
                policy: RoutePolicy(limits: limits),
                .loop { request, info, responder in routes.forwardFromLoop(request, info, responder) }
            )
        }
    }

    /// The async path. `rejected`: a token the API just refused on the loop path (so the first
    /// try already asks for a fresh one).
    func forward(_ request: ServerRequest, _ info: RequestInfo, rejected: String? = nil) async throws -> ServerResponse {
        let (upstream, target) = try route(request, info)
        let settings = upstream.settings
        let method = request.method
        let presented = try AuthRoutes.presentedToken(request)
        let session = try await auth.authenticateForAPI(accessToken: String(presented.value))
        try await DPoPGate.check(request, session: session, token: presented, auth: auth)
        guard session.account.provider == settings.provider else {
            throw AuthProblem(
                .wrongProvider,
                "This API takes accounts of provider \(settings.provider); this token's account is of \(session.account.provider)."
            )
        }
        var token = try await auth.upstreamAccessToken(for: session, scopes: settings.scopes, rejected: rejected)
        let upload = try await ProxyUpload.make(request)
        var response = try await send(request, upload, to: upstream, target: target, token: token.value, info: info)
        if response.head.status == .unauthorized, Self.idempotent.contains(method), upload.replayable,
            Self.saysInvalidToken(response.head)
        {
            // The API refused a token that looked valid (revoked, or rotated keys): one fresh
            // token and one more try. Only when the body can be sent again: none, or a small one
            // read whole; a streamed body is gone, so its 401 is passed back as it is. Within the
            // forced-refresh cooldown the same token comes back: the API's 401 goes to the app.
            let fresh = try await auth.upstreamAccessToken(for: session, scopes: settings.scopes, rejected: token.value)
            if fresh.value != token.value {
                response.cancel()
                token = fresh
                response = try await send(request, upload, to: upstream, target: target, token: token.value, info: info)
            }
        }
        return try await Self.relay(
            response,
            method: method,
            location: locations[upstream.settings.name],
            rewrite: settings.rewriteLinks ? linkRewrites[settings.name] : nil
        )
    }

    /// The configured API and the checked path of a call, or why it is refused (unknown API,
    /// method or path not allowed).
    func route(_ request: ServerRequest, _ info: RequestInfo) throws -> (Upstream, ProxyTarget) {
        guard let upstream = upstream(named: info.parameters["upstream"] ?? "") else { throw ProxyError.unknownUpstream }
        guard upstream.methods.contains(request.method) else { throw ProxyError.methodNotAllowed(allowed: upstream.settings.methods) }
        let target = try ProxyTarget(rest: info.parameters["rest"] ?? "")
        guard target.isAllowed(byBare: upstream.barePrefixes) else { throw ProxyError.pathNotAllowed }
        return (upstream, target)
    }

    func upstream(named name: String) -> Upstream? {
        guard upstreamList.count <= 16 else { return upstreams[name] }
        return upstreamList.first { $0.settings.name == name }
    }

    private func send(
        _ request: ServerRequest,
        _ upload: ProxyUpload,
        to upstream: Upstream,
        target: ProxyTarget,
        token: String,
        info: RequestInfo
    ) async throws -> HTTPClientStreamingResponse {
        let head = upstreamHead(request, to: upstream, target: target, token: token, info: info)
        do {
            return try await upstream.client.stream(
                head,
                body: upload.body,
                idleTimeout: .seconds(upstream.settings.timeoutSeconds),
                wholeBodyUpTo: Self.smallBody
            )
        } catch let error as HTTPClientError {
            throw upload.error(sending: error)
        }
    }

    /// The request to the API: its URL under the configured base, and the app's fields with the
    /// upstream token and the forwarding fields.
    func upstreamHead(
        _ request: ServerRequest,
        to upstream: Upstream,
        target: ProxyTarget,
        token: String,
        info: RequestInfo
    ) -> HTTPRequest {
        HTTPRequest(
            method: request.method,
            scheme: upstream.scheme,
            authority: upstream.authority,
            path: upstreamPath(request, to: upstream, target: target),
            headerFields: ProxyHeaders.request(request.fields, token: token, forwarding: forwarding(info), extra: upstream.extraFields)
        )
    }

    /// ``upstreamHead(_:to:target:token:info:)`` as the loop's client takes it.
    func upstreamLoopRequest(
        _ request: ServerRequest,
        to upstream: Upstream,
        target: ProxyTarget,
        bearer: SharedHeaderLines,
        info: RequestInfo
    ) -> LoopRequest {
        LoopRequest(
            method: request.method.rawValue,
            scheme: upstream.scheme,
            authority: upstream.authority,
            path: upstreamPath(request, to: upstream, target: target),
            headers: ProxyHeaders.requestLines(
                request.fields,
                clientAddress: info.clientAddress,
                requestID: info.requestID,
                extra: upstream.extraFields,
                extraLines: upstream.extraLines,
                forwardedLines: forwardedLines
            ),
            sharedHeaders: bearer
        )
    }

    private func upstreamPath(_ request: ServerRequest, to upstream: Upstream, target: ProxyTarget) -> String {
        var path = upstream.basePath
        path += target.rawPath
        if let query = request.rawQuery {
            path += "?"
            path += query
        }
        return path
    }

    private func forwarding(_ info: RequestInfo) -> ProxyHeaders.Forwarding {
        ProxyHeaders.Forwarding(clientAddress: info.clientAddress, proto: publicScheme, host: publicHost, requestID: info.requestID)
    }

    /// RFC 6750 §3.1: the API says the token itself is the problem.
    static func saysInvalidToken(_ head: HTTPResponse) -> Bool {
        head.headerFields[values: .wwwAuthenticate].contains { $0.contains("invalid_token") }
    }

    /// Bodies that announce at most this many bytes are read whole: an API's answer before
    /// answering (one write, no suspension of the app's connection per chunk), an app's upload
    /// before the call (``ProxyUpload``); larger or unannounced ones stream.
    static let smallBody = 64 * 1024

    /// The API's answer as it is: status, end-to-end fields and the body, streamed (or, when
    /// small and of known length, passed in one piece). With `rewrite` (the API's
    /// `rewrite_links`), its links are made TokenGate's (``relayRewriting(_:fields:method:rewrite:)``).
    static func relay(
        _ response: HTTPClientStreamingResponse,
        method: HTTPRequest.Method,
        location: ProxyLocation? = nil,
        rewrite: ProxyLinkRewrite? = nil
    ) async throws -> ServerResponse {
        var fields = ProxyHeaders.response(response.head.headerFields)
        if let location, let value = fields[.location], let rewritten = location.rewrite(value) { fields[.location] = rewritten }
        if let rewrite {
            rewrite.rewriteLinkFields(&fields)
            if let answer = try await relayRewriting(response, fields: fields, method: method, rewrite: rewrite) { return answer }
        }
        if let length = response.head.headerFields[.contentLength].flatMap(Int.init), length <= smallBody, method != .head {
            let body: [UInt8]
            do {
                body = try await response.collect(upTo: smallBody)
            } catch {
                response.cancel()
                throw (error as? HTTPClientError) == .timeout ? ProxyError.upstreamTimeout : ProxyError.upstreamUnavailable
            }
            return ServerResponse(status: response.head.status, headerFields: fields, body: .bytes(body))
        }
        return ServerResponse(
            status: response.head.status,
            headerFields: fields,
            body: .stream { writer in
                do {
                    for try await chunk in response { try await writer.write(chunk) }
                } catch {
                    response.cancel()
                    throw error
                }
            }
        )
    }
}
