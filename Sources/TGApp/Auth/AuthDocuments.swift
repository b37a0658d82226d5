import Foundation
import TGAuth

// The `/auth/*` routes' answers, each a value encoded once (``JSON``), with the wire's
// snake_case member names (openapi.yaml).

/// `POST /auth/logout`.
struct LoggedOut: Encodable {
    var sessionsEnded: Int
    var accountsRemoved: Int
    var revoked: Bool
    var upstreamRevocations: [String]
    var endSessionURL: String?

    init(_ result: LogoutResult) {
        sessionsEnded = result.sessionsEnded
        accountsRemoved = result.accountsRemoved
        revoked = result.revoked
        upstreamRevocations = result.revocations.map(\.rawValue)
        endSessionURL = result.endSessionURL
    }

    enum CodingKeys: String, CodingKey {
        case sessionsEnded = "sessions_ended"
        case accountsRemoved = "accounts_removed"
        case revoked
        case upstreamRevocations = "upstream_revocations"
        case endSessionURL = "end_session_url"
    }
}

/// `GET /auth/me`: the account's members, and the session's.
struct Me: Encodable {
    var account: AccountSummary
    var sessionExpiresAt: String
    /// RFC 9449 §6: the key the token is bound to.
    var confirmation: Confirmation?

    struct Confirmation: Encodable {
        var jkt: String
    }

    init(_ context: SessionContext) {
        account = context.account
        sessionExpiresAt = ISO8601DateFormatter().string(from: context.expiresAt)
        confirmation = context.dpopJKT.map(Confirmation.init)
    }

    enum CodingKeys: String, CodingKey {
        case sessionExpiresAt = "session_expires_at"
        case confirmation = "cnf"
    }

    func encode(to encoder: any Encoder) throws {
        // The account's members and these in one object.
        try account.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sessionExpiresAt, forKey: .sessionExpiresAt)
        try container.encodeIfPresent(confirmation, forKey: .confirmation)
    }
}

/// An entry of `GET /auth/accounts`: the account's members and whether it is the caller's.
struct ListedAccount: Encodable {
    var account: AccountSummary
    var current: Bool

    init(_ entry: DeviceAccount) {
        account = entry.account
        current = entry.isCurrent
    }

    enum CodingKeys: String, CodingKey {
        case current
    }

    func encode(to encoder: any Encoder) throws {
        try account.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(current, forKey: .current)
    }
}
