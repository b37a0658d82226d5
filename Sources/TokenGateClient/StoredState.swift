import Foundation

/// What the library keeps in the ``CredentialStore``, as one item: written whole, so an account's
/// rotated refresh token, the device secret and the current account always agree.
struct StoredState: Codable, Equatable {
    struct Entry: Codable, Equatable {
        var account: Account
        var refreshToken: String

        enum CodingKeys: String, CodingKey {
            case account
            case refreshToken = "refresh_token"
        }
    }

    /// The gateway's secret of this device: sent with a later sign-in so that the account joins
    /// this device's others.
    var deviceSecret: String?
    var currentAccountID: String?
    /// In the order they signed in.
    var entries: [Entry] = []

    enum CodingKeys: String, CodingKey {
        case deviceSecret = "device_secret"
        case currentAccountID = "current_account_id"
        case entries = "accounts"
    }

    static let key = "tokengate.state"

    static func load(from store: any CredentialStore) throws -> StoredState {
        guard let data = try store.data(for: key) else { return StoredState() }
        return try JSONDecoder().decode(StoredState.self, from: data)
    }

    func save(to store: any CredentialStore) throws {
        try store.set(try JSONEncoder().encode(self), for: Self.key)
    }

    func entry(_ id: String) -> Entry? { entries.first { $0.account.id == id } }

    /// Adds `entry`, or replaces the same account's.
    mutating func put(_ entry: Entry) {
        if let index = entries.firstIndex(where: { $0.account.id == entry.account.id }) {
            entries[index] = entry
        } else {
            entries.append(entry)
        }
    }

    mutating func remove(_ id: String) {
        entries.removeAll { $0.account.id == id }
        if currentAccountID == id { currentAccountID = entries.first?.account.id }
    }
}

/// The gateway's token answer (`openapi.yaml`, `TokenResponse`).
struct TokenResponse: Decodable {
    let accessToken: String
    let tokenType: String
    let expiresIn: Int
    let refreshToken: String
    let account: Account
    let deviceSecret: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case account
        case deviceSecret = "device_secret"
    }
}

/// The answer of a transfer code's redemption: the first account's token answer at the top,
/// every restored account in `accounts`, the ones to sign in again in `interaction_required`.
struct TransferResponse: Decodable {
    struct ToSignIn: Decodable {
        let accountID: String?
        let provider: String?
        let loginHint: String?

        enum CodingKeys: String, CodingKey {
            case accountID = "account_id"
            case provider
            case loginHint = "login_hint"
        }
    }

    let accounts: [TokenResponse]?
    let deviceSecret: String?
    let interactionRequired: [ToSignIn]?

    enum CodingKeys: String, CodingKey {
        case accounts
        case deviceSecret = "device_secret"
        case interactionRequired = "interaction_required"
    }
}
