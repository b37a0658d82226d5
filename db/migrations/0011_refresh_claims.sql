-- An upstream refresh in flight, recorded before the provider is asked (docs/scaling.md,
-- "PostgreSQL failover"). The grant's advisory lock keeps instances from refreshing one grant at
-- once, but a session-level lock lives on one server: when the primary fails over, the lock is
-- gone while its holder still waits for the provider, and a waiter on the new primary could send
-- the same refresh token again, which a provider that detects reuse answers by revoking the
-- grant. This claim is a row, so it moves to the new primary with the data (with synchronous
-- replication, always). `refresh_claimed_on` is the claiming server's pg_postmaster_start_time():
-- a claim made on this very server whose lock is free again lost its holder (the process died),
-- and is void; one made on another server (before a failover or a restart) holds until
-- `refresh_claimed_until` (the provider's request timeout and a margin). Writing the provider's
-- answer (or its failure) clears it.
ALTER TABLE upstream_grants
    ADD COLUMN refresh_claimed_until timestamptz,
    ADD COLUMN refresh_claimed_on timestamptz;
