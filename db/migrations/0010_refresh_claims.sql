-- An upstream refresh in flight, recorded before the provider is asked (docs/scaling.md,
-- "PostgreSQL failover"). The grant's advisory lock keeps instances from refreshing one grant at
-- once, but a session-level lock lives on one server: when the primary fails over, the lock is
-- gone while its holder still waits for the provider, and a waiter on the new primary could send
-- the same refresh token again, which a provider that detects reuse answers by revoking the
-- grant. This claim is a row, so it moves to the new primary with the data (with synchronous
-- replication, always): no instance asks the provider while another's claim on the grant's
-- version is unexpired. Writing the provider's answer (or its failure) clears it; a holder that
-- died leaves it to expire (the provider's request timeout and a margin).
ALTER TABLE upstream_grants ADD COLUMN refresh_claimed_until timestamptz;
