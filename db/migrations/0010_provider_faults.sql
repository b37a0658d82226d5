-- Faults that are not the user's never cost the user their sign-in (docs/proxy.md, "When the
-- provider refuses the refresh").
--
-- A provider that refuses TokenGate's client (an expired secret, a certificate not yet uploaded,
-- a firewall's 403 page, a 404 after a tenant move) is failing as a whole, for every instance:
-- nobody asks it for a refresh before `retry_at`, and then one instance does (it moves
-- `retry_at` on first). The same row holds the safety valve: when `valve_count` distinct grants
-- of the provider are rejected within the valve window with no success between, the provider is
-- treated as failing (`kind = 'rejections'`) instead of ending more accounts, and the accounts
-- it ended since `restore_from` come back on its next success.
CREATE TABLE provider_faults (
    provider            text PRIMARY KEY,
    kind                text CHECK (kind IN ('client', 'rejections')),   -- NULL: not failing
    reason              text,             -- what the provider answered (safe to log)
    failing_since       timestamptz,
    retry_at            timestamptz,      -- no refresh is tried at the provider before this
    failures            integer NOT NULL DEFAULT 0,   -- failed attempts since failing_since
    restore_from        timestamptz,      -- the valve: accounts rejected since then are restored
    client_checked_at   timestamptz,      -- the client was last seen accepted (ClientCheck)
    last_success_at     timestamptz       -- the valve counts rejections after this only
);

-- Grants the provider rejected, for the valve's count and for restoring them. Kept until the
-- account goes (at the end of its grace period) or signs in again.
CREATE TABLE grant_rejections (
    provider        text NOT NULL,
    account_id      uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    rejected_at     timestamptz NOT NULL,
    PRIMARY KEY (provider, account_id)
);
CREATE INDEX grant_rejections_account ON grant_rejections (account_id);

-- A rejected grant is not revoked and deleted at once: its account stays, stale, for a grace
-- period (`stale_at`), and its sessions wait here, unusable (no query of `sessions` sees them),
-- so that an account the valve restores comes back signed in. Same columns, in the same order,
-- as `sessions`: a migration that adds a column to one adds it to the other.
ALTER TABLE accounts ADD COLUMN stale_at timestamptz;
UPDATE accounts SET stale_at = updated_at WHERE state = 'stale';
CREATE TABLE suspended_sessions (LIKE sessions INCLUDING DEFAULTS);
ALTER TABLE suspended_sessions ADD PRIMARY KEY (id),
    ADD FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE,
    ADD FOREIGN KEY (device_id) REFERENCES devices (id) ON DELETE CASCADE;
CREATE INDEX suspended_sessions_account ON suspended_sessions (account_id);
CREATE INDEX suspended_sessions_device ON suspended_sessions (device_id);
