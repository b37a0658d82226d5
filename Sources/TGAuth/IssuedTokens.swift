public import Foundation
import TGStore

/// What the token endpoint answers (RFC 6749 §5.1 plus TokenGate's `account` and `device_secret`).
public struct IssuedTokens: Sendable, Codable, Equatable {
    public var accessToken: String
    public var tokenType = "Bearer"
    public var expiresIn: Int
    public var refreshToken: String
    public var account: AccountSummary
    /// Only in the answer that created the device (OpenID Connect Native SSO's `device_secret`).
    public var deviceSecret: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case account
        case deviceSecret = "device_secret"
    }
}

/// An account as an app sees it: who, at which provider, and display claims.
///
/// Immutable, and kept in one shared object: every proxied call reads its session's account from
/// memory, and a copy is then one reference instead of seven strings.
public struct AccountSummary: Sendable, Codable, Equatable {
    private final class Storage: Sendable {
        let id: UUID
        let provider: String
        let issuer: String
        let subject: String
        let tenant: String?
        let name: String?
        let email: String?
        let preferredUsername: String?

        init(
            id: UUID,
            provider: String,
            issuer: String,
            subject: String,
            tenant: String?,
            name: String?,
            email: String?,
            preferredUsername: String?
        ) {
            self.id = id
            self.provider = provider
            self.issuer = issuer
            self.subject = subject
            self.tenant = tenant
            self.name = name
            self.email = email
            self.preferredUsername = preferredUsername
        }
    }

    private let storage: Storage

    public var id: UUID { storage.id }
    public var provider: String { storage.provider }
    public var issuer: String { storage.issuer }
    public var subject: String { storage.subject }
    public var tenant: String? { storage.tenant }
    public var name: String? { storage.name }
    public var email: String? { storage.email }
    public var preferredUsername: String? { storage.preferredUsername }

    public static func == (lhs: AccountSummary, rhs: AccountSummary) -> Bool {
        lhs.storage === rhs.storage
            || (lhs.id == rhs.id && lhs.provider == rhs.provider && lhs.issuer == rhs.issuer && lhs.subject == rhs.subject
                && lhs.tenant == rhs.tenant && lhs.name == rhs.name && lhs.email == rhs.email
                && lhs.preferredUsername == rhs.preferredUsername)
    }

    enum CodingKeys: String, CodingKey {
        case id, provider, issuer, subject, tenant, name, email
        case preferredUsername = "preferred_username"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        guard let id = UUID(uuidString: try c.decode(String.self, forKey: .id)) else {
            throw DecodingError.dataCorruptedError(forKey: .id, in: c, debugDescription: "not a UUID")
        }
        storage = Storage(
            id: id,
            provider: try c.decode(String.self, forKey: .provider),
            issuer: try c.decode(String.self, forKey: .issuer),
            subject: try c.decode(String.self, forKey: .subject),
            tenant: try c.decodeIfPresent(String.self, forKey: .tenant),
            name: try c.decodeIfPresent(String.self, forKey: .name),
            email: try c.decodeIfPresent(String.self, forKey: .email),
            preferredUsername: try c.decodeIfPresent(String.self, forKey: .preferredUsername)
        )
    }

    /// Ids are written in lower case, as PostgreSQL and every path parameter spell them.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id.uuidString.lowercased(), forKey: .id)
        try c.encode(provider, forKey: .provider)
        try c.encode(issuer, forKey: .issuer)
        try c.encode(subject, forKey: .subject)
        try c.encodeIfPresent(tenant, forKey: .tenant)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(email, forKey: .email)
        try c.encodeIfPresent(preferredUsername, forKey: .preferredUsername)
    }

    /// From a row with the account's columns (`id`, `provider`, `issuer`, `subject`, `tenant`, `claims`).
    init(stored: StoredAccount) {
        let claims = (try? JSONSerialization.jsonObject(with: Data(stored.claims.utf8))) as? [String: Any]
        storage = Storage(
            id: stored.id,
            provider: stored.provider,
            issuer: stored.issuer,
            subject: stored.subject,
            tenant: stored.tenant,
            name: claims?["name"] as? String,
            email: claims?["email"] as? String,
            preferredUsername: claims?["preferred_username"] as? String
        )
    }
}
