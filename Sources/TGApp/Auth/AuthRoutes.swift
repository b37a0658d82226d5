import Foundation
import HTTPTypes
import TGAuth
import TGBase
import TGHTTPServer

/// The app-facing auth endpoints (`/auth/*`), each over the `TGAuth` piece of its flow.
enum AuthRoutes {
    struct Limits: Sendable {
        var login: RateLimiter
        var callback: RateLimiter
        var token: RateLimiter
        var transfer: RateLimiter
    }

    static func add(
        to router: inout Router,
        sessions: Sessions,
        logins: LoginFlow,
        grants: TokenGrants,
        transfers: TransferCodes,
        logouts: Logouts,
        dpop: DPoPBinding,
        limits: Limits
    ) {
        // The session a bearer token names, for the routes that need one.
        let session = RoutePolicy(session: { request in
            let token = try presentedToken(request)
            let context = try await sessions.authenticate(accessToken: String(token.value))
            try await DPoPGate.check(request, session: context, token: token, dpop: dpop)
            return context
        })
        router.add(
            .get,
            "/auth/login",
            policy: RoutePolicy(rateLimit: limits.login),
            .async { request, _ in
                let url = try await logins.beginLogin(try LoginRequest(parameters: request.queryItems))
                if wantsJSON(request) { return JSON.response(.ok, ["authorization_url": url]) }
                return redirect(to: url)
            }
        )
        let callback: Router.Handler = .async { request, _ in
            let parameters = request.method == .post ? try formParameters(request) : request.queryItems
            return redirect(to: try await logins.completeLogin(CallbackParameters(parameters: parameters)))
        }
        router.add(.get, "/auth/callback", policy: RoutePolicy(rateLimit: limits.callback), callback)
        router.add(.post, "/auth/callback", policy: RoutePolicy(rateLimit: limits.callback), callback)
        // GET consumes the pending login: a HEAD (a link scanner, a prefetch) must not.
        router.add(.head, "/auth/callback", .async { _, _ in Problem.methodNotAllowed([.get, .post]).response() })
        router.add(
            .post,
            "/auth/token",
            policy: RoutePolicy(rateLimit: limits.token, refusal: .oauth),
            .async { request, _ in try await TokenEndpoint.handle(request, grants: grants, transfers: transfers, dpop: dpop) }
        )
        router.add(
            .post,
            "/auth/logout",
            .async { request, _ in
                let presented = try presentedToken(request)
                let token = String(presented.value)
                // A DPoP-bound session logs out only with a proof of its key (expired or not).
                if let context = try await sessions.session(ofAccessToken: token) {
                    try await DPoPGate.check(request, session: context, token: presented, dpop: dpop)
                }
                var parameters = request.queryItems
                if !request.body.isEmpty { parameters += try formParameters(request) }
                var scope = LogoutScope.device
                if let account = parameters.first(where: { $0.name == "account" })?.value {
                    scope = .account(try accountID(account))
                }
                let everywhere = try flag(parameters.first(where: { $0.name == "everywhere" })?.value, "everywhere")
                let returnTo = parameters.first(where: { $0.name == "post_logout_redirect_uri" }).map { uri in
                    LogoutReturn(uri: uri.value, state: parameters.first(where: { $0.name == "state" })?.value)
                }
                let result = try await logouts.logout(accessToken: token, scope: scope, everywhere: everywhere, returnTo: returnTo)
                return JSON.response(.ok, LoggedOut(result))
            }
        )
        // The provider's logout page sends the browser here (register
        // <public_base_url>/auth/logout/return at the provider); it goes on to the app.
        router.add(
            .get,
            Logouts.logoutReturnPath,
            .async { request, _ in
                let state = request.queryItems.first(where: { $0.name == "state" })?.value
                guard let destination = try logouts.logoutReturn(state: state) else {
                    return ServerResponse(
                        status: .ok,
                        contentType: "text/plain; charset=utf-8",
                        body: "You are signed out. You can return to the app.",
                        headerFields: [.cacheControl: "no-store"]
                    )
                }
                return ServerResponse(status: .found, headerFields: [.location: destination, .cacheControl: "no-store"])
            }
        )
        // Re-link after a lost Keychain: a code the app keeps where it survives (README, "Transfer codes").
        router.add(
            .post,
            "/auth/transfer",
            policy: RoutePolicy(rateLimit: limits.transfer, session: session.session),
            .async { request, info in
                let context = try info.requireSession()
                let parameters = request.body.isEmpty ? [] : try formParameters(request)
                func value(_ name: String) throws -> String? {
                    let values = parameters.filter { $0.name == name }
                    guard values.count <= 1 else { throw AuthProblem(.invalidRequest, "\(name) appears more than once.") }
                    return values.first?.value
                }
                guard let challenge = try value("code_challenge") else {
                    throw AuthProblem(
                        .invalidRequest,
                        "code_challenge is required: the S256 challenge of a verifier you keep beside the transfer code."
                    )
                }
                let method = try value("code_challenge_method")
                let code = try await transfers.issueTransferCode(context, codeChallenge: challenge, method: method)
                return JSON.response(.ok, code)
            }
        )
        router.add(
            .delete,
            "/auth/transfer",
            policy: session,
            .async { _, info in
                JSON.response(.ok, ["revoked": try await transfers.revokeTransferCodes(try info.requireSession())])
            }
        )
        router.add(
            .get,
            "/auth/me",
            policy: session,
            .async { _, info in
                JSON.response(.ok, Me(try info.requireSession()))
            }
        )
        router.add(
            .get,
            "/auth/accounts",
            policy: session,
            .async { _, info in
                let context = try info.requireSession()
                let accounts = try await sessions.deviceAccounts(context).map(ListedAccount.init)
                return JSON.response(.ok, ["accounts": accounts])
            }
        )
        router.add(
            .delete,
            "/auth/accounts/{id}",
            policy: session,
            .async { _, info in
                let context = try info.requireSession()
                try await logouts.removeAccount(try accountID(info.parameters["id"] ?? ""), context: context)
                return ServerResponse(status: .noContent, headerFields: [.cacheControl: "no-store"])
            }
        )
    }

    // MARK: - Request reading

    /// The access token of `Authorization` (RFC 6750 §2.1, or RFC 9449 §7.1's `DPoP` scheme).
    static func bearer(_ request: ServerRequest) throws -> String {
        String(try presentedToken(request).value)
    }

    /// The access token as a slice of the header, not copied (the cached proxy path only hashes
    /// it), and whether it came with the `DPoP` scheme.
    static func presentedToken(_ request: ServerRequest) throws -> PresentedToken {
        // On the bytes in place: this runs on every proxied call.
        guard let header = request.fields.first(.authorization),
            let (bounds, isDPoP) = header.withUTF8Bytes(Self.tokenBounds)
        else {
            throw noToken
        }
        let utf8 = header.utf8
        let value = Substring(
            utf8[utf8.index(utf8.startIndex, offsetBy: bounds.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: bounds.upperBound)]
        )
        return PresentedToken(value: value, isDPoP: isDPoP)
    }

    /// Where the token is in an `Authorization` value: after `Bearer` or `DPoP` (any case) and
    /// blanks, before trailing blanks; nil when the scheme is neither or nothing follows it.
    /// A request without a TokenGate token in `Authorization`.
    static let noToken = AuthProblem(.invalidToken, "Send the TokenGate access token as Authorization: Bearer <token>.")

    static func tokenBounds(_ bytes: UnsafeBufferPointer<UInt8>) -> (Range<Int>, isDPoP: Bool)? {
        func starts(with scheme: StaticString) -> Bool {
            guard bytes.count > scheme.utf8CodeUnitCount else { return false }
            for index in 0..<scheme.utf8CodeUnitCount {
                let byte = bytes[index]
                guard ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) == scheme.utf8Start[index] else { return false }
            }
            return true
        }
        let isDPoP: Bool
        if starts(with: "bearer ") {
            isDPoP = false
        } else if starts(with: "dpop ") {
            isDPoP = true
        } else {
            return nil
        }
        var start = isDPoP ? 5 : 7
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        return (start..<end, isDPoP)
    }

    /// The body's `application/x-www-form-urlencoded` parameters.
    static func formParameters(_ request: ServerRequest) throws -> [(name: String, value: String)] {
        let type = request.fields.first(.contentType)?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
        guard type?.lowercased() == "application/x-www-form-urlencoded" else {
            throw AuthProblem(.invalidRequest, "Send the parameters as application/x-www-form-urlencoded.")
        }
        guard let text = String(validating: request.body, as: UTF8.self), let pairs = FormURLEncoding.decodeAll(text) else {
            throw AuthProblem(.invalidRequest, "The form has a bad percent-encoding or is not UTF-8; encode it as application/x-www-form-urlencoded.")
        }
        return pairs
    }

    static func accountID(_ text: String) throws -> UUID {
        guard text.utf8.count == 36, let id = UUID(uuidString: text) else {
            throw AuthProblem(.invalidRequest, "account must be an account id from /auth/accounts.")
        }
        return id
    }

    static func flag(_ value: String?, _ name: String) throws -> Bool {
        switch value {
        case nil, "false", "0": return false
        case "true", "1": return true
        default: throw AuthProblem(.invalidRequest, "\(name) must be true or false.")
        }
    }

    static func wantsJSON(_ request: ServerRequest) -> Bool {
        request.fields.first(.accept)?.lowercased().contains("application/json") == true
    }

    // MARK: - Answers

    static func redirect(to url: String) -> ServerResponse {
        ServerResponse(status: .found, headerFields: [.location: url, .cacheControl: "no-store", .referrerPolicy: "no-referrer"])
    }
}
