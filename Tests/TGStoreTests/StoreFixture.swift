import Foundation
import TGPostgres
import TGStore
import TGTesting

/// A fresh database with TokenGate's schema, its store, and helpers to fill it.
struct StoreFixture {
    let store: Store
    /// The database's URL (for what needs a connection of its own).
    let url: String
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    var database: PostgresClient { store.database }

    static func run(_ body: (StoreFixture) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase(migrations: SchemaMigrations.all) { database, url in
            try await body(StoreFixture(store: Store(database: database), url: url))
        }
    }

    static func randomHash() -> TokenHash { TokenHash((0..<32).map { _ in UInt8.random(in: 0...255) }) }

    static func blob(_ text: String) -> SealedBlob { SealedBlob(Array(text.utf8)) }

    /// An active account of `subject`, with a grant sealed as `grant-<subject>` under key k1.
    func account(_ subject: String, withGrant: Bool = true) async throws -> UUID {
        let id = try await store.accounts.upsert(
            provider: "fake",
            issuer: "https://idp.example",
            tenant: nil,
            subject: subject,
            claims: #"{"name":"\#(subject)"}"#,
            now: now
        )
        if withGrant {
            try await store.accounts.storeGrant(
                GrantWrite(
                    account: id,
                    refreshToken: Self.blob("grant-\(subject)"),
                    keyID: "k1",
                    scopes: ["openid"],
                    expiresAt: nil,
                    idTokenHint: Self.blob("hint-\(subject)"),
                    policy: nil
                ),
                now: now
            )
        }
        return id
    }

    func device(client: String = "com.example.app", secretHash: TokenHash = randomHash()) async throws -> UUID {
        try await store.devices.create(secretHash: secretHash, client: client, now: now)
    }

    /// Starts the session of (device, account); returns its id and access-token hash.
    @discardableResult
    func session(
        device: UUID,
        account: UUID,
        idleFor idle: TimeInterval = 3600,
        providerSession: String? = nil
    ) async throws -> (id: UUID, access: TokenHash) {
        let access = Self.randomHash()
        let id = try await store.sessions.start(
            SessionStore.Start(
                device: device,
                account: account,
                clientID: "com.example.app",
                accessTokenHash: access,
                accessExpiresAt: now.addingTimeInterval(300),
                refreshTokenHash: Self.randomHash(),
                expiresAt: now.addingTimeInterval(idle),
                absoluteExpiresAt: now.addingTimeInterval(86400),
                now: now,
                providerSessionID: providerSession
            )
        )
        return (id, access)
    }

    func count(_ table: String) async throws -> Int {
        try await database.query(PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table)")).first?.decode(Int.self, "n") ?? -1
    }
}
