public import Foundation
import TGBase

/// A successful token response (RFC 6749 §5.1), parsed strictly.
public struct TokenResponse: Sendable, Hashable {
    public var accessToken: String
    /// When the access token expires (from `expires_in`); nil when the provider did not say.
    public var accessTokenExpiresAt: Date?
    /// `expires_in` as the provider gave it, in seconds: for a caller that keeps time with a
    /// clock of its own and counts the lifetime from its own now.
    public var accessTokenLifetime: TimeInterval?
    /// A new refresh token when the provider issued (or rotated) one; nil means keep the old one.
    public var refreshToken: String?
    /// When the refresh token expires, where the provider says (`refresh_token_expires_in`).
    public var refreshTokenExpiresAt: Date?
    public var idToken: String?
    /// The granted scopes when the provider listed them (they may differ from those asked for).
    public var scopes: [String]?

    /// Parses a 200 body. `receivedAt` anchors the relative lifetimes.
    public init(json bytes: [UInt8], receivedAt: Date) throws(OIDCError) {
        guard let body = JSONValue(parsing: bytes)?.objectValue else {
            throw OIDCError(.invalidResponse("token response is not a JSON object"))
        }
        guard let accessToken = body["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw OIDCError(.invalidResponse("token response lacks access_token"))
        }
        // RFC 6749 §7.1: the type is case-insensitive; TokenGate only uses bearer tokens.
        guard body["token_type"]?.stringValue?.lowercased() == "bearer" else {
            throw OIDCError(.invalidResponse("token_type is not Bearer"))
        }
        self.accessToken = accessToken
        accessTokenLifetime = try Self.lifetime(body["expires_in"], "expires_in").map { TimeInterval($0) }
        accessTokenExpiresAt = accessTokenLifetime.map { receivedAt.addingTimeInterval($0) }
        refreshTokenExpiresAt = try Self.lifetime(body["refresh_token_expires_in"], "refresh_token_expires_in").map {
            receivedAt.addingTimeInterval(TimeInterval($0))
        }
        switch body["refresh_token"] {
        case nil, .null?: refreshToken = nil
        case .string(let token)? where !token.isEmpty: refreshToken = token
        default: throw OIDCError(.invalidResponse("refresh_token is not a string"))
        }
        switch body["id_token"] {
        case nil, .null?: idToken = nil
        case .string(let token)? where !token.isEmpty: idToken = token
        default: throw OIDCError(.invalidResponse("id_token is not a string"))
        }
        switch body["scope"] {
        case nil, .null?: scopes = nil
        case .string(let text)?: scopes = text.split(separator: " ").map(String.init)
        default: throw OIDCError(.invalidResponse("scope is not a string"))
        }
    }

    /// A lifetime in seconds: a non-negative whole number (some providers send it as a string).
    private static func lifetime(_ value: JSONValue?, _ name: String) throws(OIDCError) -> Int? {
        guard let value, value != .null else { return nil }
        guard let seconds = value.integerValue, seconds >= 0 else {
            throw OIDCError(.invalidResponse("\(name) is not a number of seconds"))
        }
        return seconds
    }
}

/// Turns a provider's non-200 answer into an ``OIDCError``: RFC 6749 §5.2 error bodies by their
/// code, 5xx and 429 as unavailability with any `Retry-After`.
enum ErrorResponse {
    /// The rule for an answer of the token endpoint (and revocation, UserInfo) that is not a
    /// success: 429, 5xx and the "try later" codes are transient; a refused scope is its own
    /// case; `invalid_client` and `unauthorized_client` refuse the client. Without an OAuth
    /// error body (none, HTML, unknown JSON) a 400 is unclear (glewlwyd's answer to a revoked
    /// grant and to a wrong secret alike) and every other 4xx refuses the client: no provider
    /// answers a dead grant with 401, 403 or 404 and nothing else, but a firewall, a moved tenant
    /// or a wrong endpoint does (docs/proxy.md, "When the provider refuses the refresh").
    static func classify(status: Int, body: [UInt8], retryAfter: String?) -> OIDCError {
        let retry = retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { Duration.seconds(max(0, min($0, 3600))) }
        if status == 429 || status >= 500 || status < 400 {
            return OIDCError(.providerUnavailable(retryAfter: retry))
        }
        let json = JSONValue(parsing: body)
        guard let code = json?["error"]?.stringValue, Self.isErrorCode(code) else {
            return OIDCError(status == 400 ? .unclearRejection(code: "HTTP 400") : .clientRejected(code: "HTTP \(status)"))
        }
        if OIDCError.transientCodes.contains(code) { return OIDCError(.providerUnavailable(retryAfter: retry)) }
        if OIDCError.scopeCodes.contains(code) { return OIDCError(.scopeRefused(code: code)) }
        if let suberror = json?["suberror"]?.stringValue, OIDCError.scopeCodes.contains(suberror) {
            return OIDCError(.scopeRefused(code: suberror))
        }
        if OIDCError.clientCodes.contains(code) { return OIDCError(.clientRejected(code: code)) }
        return OIDCError(.grantRejected(code: code))
    }

    /// RFC 6749 §5.2: error codes are printable ASCII without `"` and `\`; anything else (or an
    /// absurdly long value) is not repeated in a log.
    static func isErrorCode(_ code: String) -> Bool {
        !code.isEmpty && code.utf8.count <= 64
            && code.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E && $0 != 0x22 && $0 != 0x5C }
    }
}
