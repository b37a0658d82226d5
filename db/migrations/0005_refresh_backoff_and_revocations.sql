-- The lifecycle of upstream grants with real providers.
--
-- A provider that cannot answer a refresh is asked again for that grant only after a backoff
-- window, the same for every instance: `refresh_failures` consecutive transient failures, the
-- next attempt not before `refresh_retry_at`. A success clears both.
ALTER TABLE upstream_grants
    ADD COLUMN refresh_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN refresh_retry_at timestamptz;

-- Refresh tokens to revoke at their provider. A logout (or the sweeper) moves a grant here in
-- the same transaction that deletes it, so a provider that is down at that moment cannot leave
-- a live refresh token nobody will revoke; a worker retries with backoff until it is revoked or
-- `give_up_at` passes. The token stays sealed (AES-256-GCM, `key_id`), as in upstream_grants.
CREATE TABLE upstream_revocations (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id      uuid NOT NULL,               -- the account it belonged to (gone by now); the seal's context
    provider        text NOT NULL,
    policy          text,
    refresh_token   bytea NOT NULL,              -- ciphertext blob, sealed for the account's grant
    key_id          text NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    give_up_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX upstream_revocations_due ON upstream_revocations (next_attempt_at);
CREATE INDEX upstream_revocations_key_id ON upstream_revocations (key_id);

-- An API that answers 401 makes TokenGate refresh the grant at once, but only once per cooldown
-- (`forced_refresh_at`), so a misbehaving API cannot make it refresh on every call.
ALTER TABLE upstream_grants ADD COLUMN forced_refresh_at timestamptz;
