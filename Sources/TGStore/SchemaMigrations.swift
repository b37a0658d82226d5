public import TGPostgres

/// TokenGate's schema, as the numbered SQL files in `db/migrations/` (compiled into the binary).
/// Add a file there and a line here; a test checks that the two agree.
public enum SchemaMigrations {
    /// What of ``all`` `database` has applied and what is pending; a failure is a ``StoreError``.
    public static func status(_ database: PostgresClient) async throws -> Migrator.Status {
        try await StoreError.mapping { try await Migrator(migrations: all).status(database) }
    }

    /// Applies what of ``all`` is pending (``Migrator/migrate(_:)``, several instances at once
    /// safely); returns what it applied. A failure is a ``StoreError`` or a `MigrationError`.
    @discardableResult
    public static func migrate(_ database: PostgresClient) async throws -> [Migration] {
        try await StoreError.mapping { try await Migrator(migrations: all).migrate(database) }
    }

    public static let all: [Migration] = [
        migration(1, "initial", PackageResources._001_initial_sql),
        migration(2, "auth_flow", PackageResources._002_auth_flow_sql),
        migration(3, "upstream_tokens", PackageResources._003_upstream_tokens_sql),
        migration(4, "grant_policy", PackageResources._004_grant_policy_sql),
        migration(5, "refresh_backoff_and_revocations", PackageResources._005_refresh_backoff_and_revocations_sql),
        migration(6, "transfer_codes", PackageResources._006_transfer_codes_sql),
        migration(7, "backchannel_logout", PackageResources._007_backchannel_logout_sql),
        migration(8, "dpop", PackageResources._008_dpop_sql),
        migration(9, "rate_limits", PackageResources._009_rate_limits_sql),
        migration(10, "provider_faults", PackageResources._010_provider_faults_sql),
        migration(11, "refresh_claims", PackageResources._011_refresh_claims_sql),
        migration(12, "dpop_proofs", PackageResources._012_dpop_proofs_sql),
        migration(13, "transfer_code_replay", PackageResources._013_transfer_code_replay_sql),
        migration(14, "provider_attempts", PackageResources._014_provider_attempts_sql),
        migration(15, "step_up_logins", PackageResources._015_step_up_logins_sql),
        migration(16, "security_event_tokens", PackageResources._016_security_event_tokens_sql),
        migration(17, "session_streams", PackageResources._017_session_streams_sql),
    ]

    private static func migration(_ version: Int, _ name: String, _ bytes: [UInt8]) -> Migration {
        Migration(version: version, name: name, sql: String(decoding: bytes, as: UTF8.self))
    }
}
