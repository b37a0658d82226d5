public import Foundation
public import TGBase
import TGCrypto

/// A validated Security Event Token (RFC 8417) a provider pushed as a Shared Signals transmitter
/// (OpenID Shared Signals Framework 1.0 over RFC 8935): one or more events about a subject.
public struct SecurityEventToken: Sendable, Hashable {
    public var issuer: String
    /// `jti`: the token is acted on once (the replay record keeps it until ``replayWindowEnd``).
    public var tokenID: String
    public var issuedAt: Date
    /// After this the token is refused as too old anyway: how long its `jti` must be remembered.
    public var replayWindowEnd: Date
    /// `events`: each event type URI with its payload (an object).
    public var events: [String: [String: JSONValue]]
    /// The SET's own subject: `sub_id` (SSF 1.0 §3.2), else `sub`; nil when it has neither.
    public var subject: SecurityEventSubject?
    /// The session `sub_id` names, when it is a `complex` subject with one.
    var subjectSessionID: String?
    /// A transmitter with an issuer of its own names accounts with it: the issuer they have here.
    var issuerAlias: (transmitter: String, account: String)?

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.issuer == rhs.issuer && lhs.tokenID == rhs.tokenID && lhs.issuedAt == rhs.issuedAt && lhs.events == rhs.events
            && lhs.subject == rhs.subject && lhs.issuerAlias?.transmitter == rhs.issuerAlias?.transmitter
            && lhs.issuerAlias?.account == rhs.issuerAlias?.account
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(tokenID)
        hasher.combine(issuer)
    }

    /// The longest `jti`, `sub` or subject `iss` accepted (compared in, and stored by, the database).
    public static let maxClaimLength = 512
    /// The most events one token may carry (SSF transmitters send one).
    public static let maxEvents = 16

    /// Whom `event` is about: its own `subject` member (CAEP and RISC events of the drafts
    /// before SSF 1.0 carry it there), else the token's. Nil when neither names anyone.
    public func subject(of event: String) -> SecurityEventSubject? {
        // Validation refused a token whose event subject is not a subject identifier.
        var found = subject
        if let member = events[event]?["subject"], let subject = SecurityEventSubject(member) { found = subject }
        if case .issuerAndSubject(let issuer, let subject)? = found, let issuerAlias, issuer == issuerAlias.transmitter {
            return .issuerAndSubject(issuer: issuerAlias.account, subject: subject)
        }
        return found
    }
    /// The provider session `event` names (a `complex` subject's `session`, SSF 1.0 §3.3, in the
    /// event's own `subject` or in `sub_id`): CAEP `session-revoked` then ends only the sessions
    /// that login started (its ID token's `sid`). Nil when it names none.
    public func sessionID(of event: String) -> String? {
        if let member = events[event]?["subject"] { return SecurityEventSubject.sessionID(in: member) }
        return subjectSessionID
    }
}

/// A subject identifier (RFC 9493, as SSF 1.0 §3 profiles it).
public enum SecurityEventSubject: Sendable, Hashable {
    /// `iss_sub` (or a plain `sub`, whose issuer is the token's): an account at a provider.
    case issuerAndSubject(issuer: String, subject: String)
    /// Any other format (`email`, `opaque`, `phone_number`, a device, a tenant, …): it names no
    /// account TokenGate can find.
    case unmapped(format: String)

    /// The `id` of a `complex` subject's `session` member (`opaque`, or any format with an `id`).
    static func sessionID(in value: JSONValue) -> String? {
        guard let members = value.objectValue, members["format"]?.stringValue == "complex",
            let session = members["session"]?.objectValue, let id = session["id"]?.stringValue, SecurityEventValidator.usable(id)
        else { return nil }
        return id
    }

    /// Reads a subject identifier object: `iss_sub`, or a `complex` subject (SSF 1.0 §3.3) by its
    /// `user` member; anything else is ``unmapped(format:)``. Nil when it is not an object with a
    /// string `format`.
    init?(_ value: JSONValue, depth: Int = 0) {
        guard let members = value.objectValue, let format = members["format"]?.stringValue ?? members["subject_type"]?.stringValue
        else { return nil }
        switch format {
        case "iss_sub", "iss-sub":
            guard let issuer = members["iss"]?.stringValue, let subject = members["sub"]?.stringValue,
                SecurityEventValidator.usable(issuer), SecurityEventValidator.usable(subject)
            else { return nil }
            self = .issuerAndSubject(issuer: issuer, subject: subject)
        case "complex" where depth == 0:
            guard let user = members["user"] else {
                self = .unmapped(format: "complex")
                return
            }
            self = SecurityEventSubject(user, depth: 1) ?? .unmapped(format: "complex")
        default:
            // A bounded label for logs: the formats RFC 9493 and SSF 1.0 register, else "other".
            let known: Set<String> = ["email", "phone_number", "opaque", "account", "did", "uri", "aliases", "jwt_id", "saml_assertion_id"]
            self = .unmapped(format: known.contains(format) ? format : "other")
        }
    }
}

/// Why a security event token was refused.
public enum SecurityEventProblem: Sendable, Hashable, CustomStringConvertible {
    /// A check it shares with ID tokens: its form, algorithm, key, signature, issuer, audience,
    /// `exp`, `nbf`, or an `iat` in the future.
    case token(IDTokenProblem)
    /// The `typ` header is neither `secevent+jwt` nor absent.
    case type
    /// No `iat`.
    case missingIssuedAt
    /// `iat` is further in the past than the accepted window.
    case tooOld
    /// `events` is missing, not an object, empty, too large, or an event payload is not an object.
    case events
    /// No usable `jti`.
    case tokenID
    /// `sub_id`, `sub` or an event's `subject` is present but not a subject identifier.
    case subject

    public var description: String {
        switch self {
        case .token(let problem): problem.description
        case .type: "typ is not secevent+jwt"
        case .missingIssuedAt: "no iat"
        case .tooOld: "issued too long ago"
        case .events: "events is not an object of event payloads"
        case .tokenID: "no usable jti"
        case .subject: "sub_id, sub or an event's subject is not a subject identifier"
        }
    }
}

/// What a security event token must match.
struct SecurityEventExpectations {
    /// The transmitter's issuer: the provider's, unless configured apart.
    var issuer: String
    /// The provider's issuer when the transmitter's is another (its subjects are mapped to it).
    var accountIssuer: String?
    /// The `aud` TokenGate expects (the configured audience; by default the client id).
    var audience: String
    var allowedTenants: Set<String>
    var allowedAlgorithms: Set<JWSAlgorithm>
    var clockSkew: Duration
    var maxAge: Duration
    var now: Date
}

enum SecurityEventValidator {
    /// Validates signature and claims (RFC 8417 §2, SSF 1.0 §4) with the machinery ID tokens
    /// and logout tokens use (``SignedJWT``). Replays are the caller's to check.
    static func validate(
        _ raw: String,
        expecting expected: SecurityEventExpectations,
        keys: (String?) async throws(OIDCError) -> [PublicKey]
    ) async throws(OIDCError) -> SecurityEventToken {
        let (header, claims) = try await SignedJWT.verify(raw, allowedAlgorithms: expected.allowedAlgorithms, keys: keys) { problem in
            OIDCError(.invalidSecurityEvent(.token(problem)))
        }
        guard typeIsAcceptable(header.type) else { throw problem(.type) }
        guard let issuer = claims["iss"]?.stringValue else { throw problem(.token(.malformed)) }
        do {
            try SignedJWT.checkIssuer(
                issuer,
                tenantID: claims["tid"]?.stringValue,
                expected: expected.issuer,
                allowedTenants: expected.allowedTenants
            )
        } catch {
            throw problem(.token(error))
        }
        guard let audiences = claims["aud"]?.stringList, audiences.contains(expected.audience) else { throw problem(.token(.audience)) }
        let skew = expected.clockSkew.timeInterval
        let now = expected.now.timeIntervalSince1970
        guard let iatClaim = claims["iat"] else { throw problem(.missingIssuedAt) }
        guard let iat = iatClaim.integerValue else { throw problem(.token(.malformed)) }
        guard TimeInterval(iat) - skew <= now else { throw problem(.token(.issuedInFuture)) }
        let windowEnd = TimeInterval(iat) + expected.maxAge.timeInterval + skew
        guard now <= windowEnd else { throw problem(.tooOld) }
        if let exp = claims["exp"] {
            guard let expiry = exp.integerValue else { throw problem(.token(.malformed)) }
            guard TimeInterval(expiry) + skew > now else { throw problem(.token(.expired)) }
        }
        if let nbf = claims["nbf"] {
            guard let notBefore = nbf.integerValue, TimeInterval(notBefore) - skew <= now else { throw problem(.token(.notYetValid)) }
        }
        guard let jti = claims["jti"]?.stringValue, usable(jti) else { throw problem(.tokenID) }
        guard let members = claims["events"]?.objectValue, !members.isEmpty, members.count <= SecurityEventToken.maxEvents else {
            throw problem(.events)
        }
        var events: [String: [String: JSONValue]] = [:]
        for (type, payload) in members {
            guard usable(type), let payload = payload.objectValue else { throw problem(.events) }
            // The drafts before SSF 1.0 name the subject in the event: it must be one then too.
            if let subject = payload["subject"], SecurityEventSubject(subject) == nil { throw problem(.subject) }
            events[type] = payload
        }
        var subject: SecurityEventSubject?
        if let identifier = claims["sub_id"] {
            guard let parsed = SecurityEventSubject(identifier) else { throw problem(.subject) }
            subject = parsed
        } else if let sub = claims["sub"] {
            guard let text = sub.stringValue, usable(text) else { throw problem(.subject) }
            subject = .issuerAndSubject(issuer: issuer, subject: text)
        }
        var token = SecurityEventToken(
            issuer: issuer,
            tokenID: jti,
            issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)),
            replayWindowEnd: Date(timeIntervalSince1970: windowEnd),
            events: events,
            subject: subject,
            issuerAlias: expected.accountIssuer.map { (issuer, $0) }
        )
        token.subjectSessionID = claims["sub_id"].flatMap(SecurityEventSubject.sessionID(in:))
        return token
    }

    /// `typ` (RFC 8417 §2.3, SSF 1.0: `secevent+jwt`; RFC 7515 §4.1.9: compared
    /// case-insensitively, `application/` may be left out). Absent is accepted (transmitters of
    /// the drafts before SSF 1.0 leave it out); any other type (`JWT` of an ID token, a logout
    /// token's `logout+jwt`, an access token's `at+jwt`) is another kind of token.
    static func typeIsAcceptable(_ type: String?) -> Bool {
        guard var type = type?.lowercased() else { return true }
        if type.hasPrefix("application/") { type.removeFirst("application/".count) }
        return type == "secevent+jwt"
    }

    static func usable(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= SecurityEventToken.maxClaimLength
    }

    private static func problem(_ problem: SecurityEventProblem) -> OIDCError {
        OIDCError(.invalidSecurityEvent(problem))
    }
}
