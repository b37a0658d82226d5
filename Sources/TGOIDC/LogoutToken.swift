public import Foundation
import TGBase
import TGCrypto

/// A validated back-channel logout token (OpenID Connect Back-Channel Logout 1.0 §2.4): the
/// provider says that the session `sessionID`, or every session of `subject`, has ended.
public struct LogoutToken: Sendable, Hashable {
    public var issuer: String
    /// `sub`, when present.
    public var subject: String?
    /// `sid`, when present: the provider's session, as the ID token of the login carried it.
    public var sessionID: String?
    /// `jti`: the token is accepted once (the replay cache keeps it until ``replayWindowEnd``).
    public var tokenID: String
    public var issuedAt: Date
    /// Entra's tenant id (`tid`), when present.
    public var tenantID: String?
    /// After this the token is refused as too old anyway: how long its `jti` must be remembered.
    public var replayWindowEnd: Date

    /// The event member of `events` that makes a JWT a logout token (§2.4).
    public static let backChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"
    /// The longest `sub`, `sid` or `jti` accepted (they are compared in, and stored by, the database).
    public static let maxClaimLength = 512
}

/// Why a logout token was rejected.
public enum LogoutTokenProblem: Sendable, Hashable, CustomStringConvertible {
    /// A check it shares with ID tokens: its form, algorithm, key, signature, issuer, tenant,
    /// audience, `exp`, `nbf`, or an `iat` in the future.
    case token(IDTokenProblem)
    /// The `typ` header is not `logout+jwt` (nor `JWT` or absent, unless explicit typing is required).
    case type
    /// No `iat`.
    case missingIssuedAt
    /// `iat` is further in the past than the accepted window.
    case tooOld
    /// `events` is not an object with the back-channel logout member as an object.
    case events
    /// A `nonce` is present (§2.4: forbidden, so that a logout token cannot pass as an ID token).
    case nonce
    /// No usable `jti`.
    case tokenID
    /// Neither `sub` nor `sid` (or one of them is not a usable string).
    case subjectOrSession
    /// This `jti` was seen before (a replay), checked by the caller's shared cache.
    case replayed

    public var description: String {
        switch self {
        case .token(let problem): problem.description
        case .type: "typ is not logout+jwt"
        case .missingIssuedAt: "no iat"
        case .tooOld: "issued too long ago"
        case .events: "events lacks the back-channel logout event"
        case .nonce: "a nonce is present"
        case .tokenID: "no usable jti"
        case .subjectOrSession: "neither a usable sub nor sid"
        case .replayed: "its jti was already used"
        }
    }
}

/// What a logout token must match.
struct LogoutTokenExpectations {
    /// The provider's issuer as its metadata says (Entra: with `{tenantid}`).
    var issuer: String
    var clientID: String
    var allowedTenants: Set<String>
    var allowedAlgorithms: Set<JWSAlgorithm>
    var clockSkew: Duration
    /// How old (`iat`) a token may be.
    var maxAge: Duration
    /// Only `typ: logout+jwt` is accepted (otherwise also `JWT` and no `typ`).
    var requiresExplicitType: Bool
    var now: Date
}

enum LogoutTokenValidator {
    /// Validates signature and claims (Back-Channel Logout 1.0 §2.6) with the machinery ID tokens
    /// use (``SignedJWT``), then the logout token's own rules. Replays are the caller's to check.
    static func validate(
        _ raw: String,
        expecting expected: LogoutTokenExpectations,
        keys: (String?) async throws(OIDCError) -> [PublicKey]
    ) async throws(OIDCError) -> LogoutToken {
        let (header, claims) = try await SignedJWT.verify(raw, allowedAlgorithms: expected.allowedAlgorithms, keys: keys) { problem in
            OIDCError(.invalidLogoutToken(.token(problem)))
        }
        guard typeIsAcceptable(header.type, explicitOnly: expected.requiresExplicitType) else { throw problem(.type) }
        guard let issuer = claims["iss"]?.stringValue else { throw problem(.token(.malformed)) }
        let tenantID = claims["tid"]?.stringValue
        do {
            try SignedJWT.checkIssuer(issuer, tenantID: tenantID, expected: expected.issuer, allowedTenants: expected.allowedTenants)
        } catch {
            throw problem(.token(error))
        }
        guard let audiences = claims["aud"]?.stringList, audiences.contains(expected.clientID) else { throw problem(.token(.audience)) }
        let skew = expected.clockSkew.timeInterval
        let now = expected.now.timeIntervalSince1970
        guard let iatClaim = claims["iat"] else { throw problem(.missingIssuedAt) }
        guard let iat = iatClaim.integerValue else { throw problem(.token(.malformed)) }
        guard TimeInterval(iat) - skew <= now else { throw problem(.token(.issuedInFuture)) }
        let windowEnd = TimeInterval(iat) + expected.maxAge.timeInterval + skew
        guard now <= windowEnd else { throw problem(.tooOld) }
        // Back-Channel Logout 1.0 (final) asks for `exp`; providers that predate it leave it out,
        // and `iat`'s window bounds those.
        if let exp = claims["exp"] {
            guard let expiry = exp.integerValue else { throw problem(.token(.malformed)) }
            guard TimeInterval(expiry) + skew > now else { throw problem(.token(.expired)) }
        }
        if let nbf = claims["nbf"] {
            guard let notBefore = nbf.integerValue, TimeInterval(notBefore) - skew <= now else { throw problem(.token(.notYetValid)) }
        }
        guard let events = claims["events"]?.objectValue, events[LogoutToken.backChannelLogoutEvent]?.objectValue != nil else {
            throw problem(.events)
        }
        guard claims["nonce"] == nil else { throw problem(.nonce) }
        guard let jti = claims["jti"]?.stringValue, usable(jti) else { throw problem(.tokenID) }
        let subject = try optionalIdentifier(claims["sub"])
        let sessionID = try optionalIdentifier(claims["sid"])
        guard subject != nil || sessionID != nil else { throw problem(.subjectOrSession) }
        return LogoutToken(
            issuer: issuer,
            subject: subject,
            sessionID: sessionID,
            tokenID: jti,
            issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)),
            tenantID: tenantID,
            replayWindowEnd: Date(timeIntervalSince1970: windowEnd)
        )
    }

    /// `typ` (RFC 7515 §4.1.9: compared case-insensitively, `application/` may be left out).
    /// Back-Channel Logout 1.0 §2.4 has providers type logout tokens `logout+jwt`; many still send
    /// `JWT` or nothing, which is accepted unless only explicit typing is. Anything else (an
    /// access token's `at+jwt`, …) is another kind of token.
    static func typeIsAcceptable(_ type: String?, explicitOnly: Bool) -> Bool {
        guard var type = type?.lowercased() else { return !explicitOnly }
        if type.hasPrefix("application/") { type.removeFirst("application/".count) }
        if type == "logout+jwt" { return true }
        return !explicitOnly && type == "jwt"
    }

    /// `sub` or `sid`: absent, or a non-empty string of bounded length (anything else is refused).
    private static func optionalIdentifier(_ value: JSONValue?) throws(OIDCError) -> String? {
        guard let value else { return nil }
        guard let text = value.stringValue, usable(text) else { throw problem(.subjectOrSession) }
        return text
    }

    private static func usable(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= LogoutToken.maxClaimLength
    }

    private static func problem(_ problem: LogoutTokenProblem) -> OIDCError {
        OIDCError(.invalidLogoutToken(problem))
    }
}
