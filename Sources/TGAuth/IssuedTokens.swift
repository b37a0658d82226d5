public import Foundation
import TGPostgres

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
public struct AccountSummary: Sendable, Codable, Equatable {
    public var id: UUID
    public var provider: String
    public var issuer: String
    public var subject: String
    public var tenant: String?
    public var name: String?
    public var email: String?
    public var preferredUsername: String?

    enum CodingKeys: String, CodingKey {
        case id, provider, issuer, subject, tenant, name, email
        case preferredUsername = "preferred_username"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        guard let id = UUID(uuidString: try c.decode(String.self, forKey: .id)) else {
            throw DecodingError.dataCorruptedError(forKey: .id, in: c, debugDescription: "not a UUID")
        }
        self.id = id
        provider = try c.decode(String.self, forKey: .provider)
        issuer = try c.decode(String.self, forKey: .issuer)
        subject = try c.decode(String.self, forKey: .subject)
        tenant = try c.decodeIfPresent(String.self, forKey: .tenant)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        preferredUsername = try c.decodeIfPresent(String.self, forKey: .preferredUsername)
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
    init(row: PostgresRow, idColumn: String = "id") throws {
        id = try row.decode(UUID.self, idColumn)
        provider = try row.decode(String.self, "provider")
        issuer = try row.decode(String.self, "issuer")
        subject = try row.decode(String.self, "subject")
        tenant = try row.decode(String?.self, "tenant")
        let claims = (try? JSONSerialization.jsonObject(with: Data((try row.decode(String.self, "claims")).utf8))) as? [String: Any]
        name = claims?["name"] as? String
        email = claims?["email"] as? String
        preferredUsername = claims?["preferred_username"] as? String
    }
}
