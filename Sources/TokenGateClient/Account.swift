public import Foundation

/// An account signed in on this device through the gateway: who, at which identity provider.
/// The wire form is the gateway's `account` object (`openapi.yaml`).
public struct Account: Sendable, Codable, Equatable, Hashable, Identifiable {
    /// The gateway's id of the account (a UUID, lowercase).
    public let id: String
    /// The configured provider's name (`providers[].name` on the gateway).
    public let provider: String
    public let issuer: String
    public let subject: String
    public let tenant: String?
    public let name: String?
    public let email: String?
    public let preferredUsername: String?

    public init(
        id: String,
        provider: String,
        issuer: String,
        subject: String,
        tenant: String? = nil,
        name: String? = nil,
        email: String? = nil,
        preferredUsername: String? = nil
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

    enum CodingKeys: String, CodingKey {
        case id, provider, issuer, subject, tenant, name, email
        case preferredUsername = "preferred_username"
    }
}

/// An access token of the gateway for one account, as long as it is good for.
public struct AccessToken: Sendable, Equatable {
    public let value: String
    /// `Bearer`, or `DPoP` when the token is bound to this install's key.
    public let tokenType: String
    public let expiresAt: Date

    public var isDPoPBound: Bool { tokenType.caseInsensitiveCompare("DPoP") == .orderedSame }
}

/// An account a transfer code could not restore, and what a new sign-in needs.
public struct SignInHint: Sendable, Equatable {
    public let accountID: String?
    public let provider: String?
    public let loginHint: String?
}

/// What ``TokenGateClient/restoreFromTransferCode()`` brought back.
public struct TransferRestore: Sendable, Equatable {
    /// The accounts signed in again without a login, in the order they first signed in.
    public let restored: [Account]
    /// The accounts that need a new sign-in (``TokenGateClient/signIn(provider:policy:loginHint:)``
    /// with the hint's provider and login hint).
    public let signInRequired: [SignInHint]
}

/// What a logout ended on the gateway.
public struct LogoutResult: Sendable, Equatable {
    public let sessionsEnded: Int
    public let accountsRemoved: Int
    /// The provider's logout page, when it has one and the browser was not sent there.
    public let endSessionURL: URL?
}
