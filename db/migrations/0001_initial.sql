-- TokenGate initial schema (docs/architecture.md, "Storage").
-- Secrets at rest are AES-256-GCM blobs (bytea) that name their key id; TokenGate's own tokens and
-- codes are stored only as SHA-256 hashes (bytea, 32 bytes). Times are timestamptz (UTC).

-- An app installation: the set of accounts one phone has signed in with. TokenGate issues its
-- secret; no client-made identifier ever links accounts.
CREATE TABLE devices (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    secret_hash     bytea NOT NULL UNIQUE CHECK (octet_length(secret_hash) = 32),
    client_id       text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now()
);

-- A user at an identity provider.
CREATE TABLE accounts (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    provider        text NOT NULL,
    issuer          text NOT NULL,
    tenant          text,
    subject         text NOT NULL,
    claims          jsonb NOT NULL DEFAULT '{}'::jsonb,   -- display claims only (name, email, …)
    state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'stale')),
    stale_reason    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, issuer, subject)
);
CREATE INDEX accounts_stale ON accounts (state) WHERE state = 'stale';
CREATE INDEX accounts_last_used ON accounts (last_used_at);

-- The provider's refresh token for an account (one grant per account and provider).
CREATE TABLE upstream_grants (
    account_id          uuid PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    refresh_token       bytea NOT NULL,          -- ciphertext blob (names its key id)
    key_id              text NOT NULL,           -- copy of the blob's key id, for re-encryption batches
    scopes              text[] NOT NULL DEFAULT '{}',
    expires_at          timestamptz,             -- refresh_token_expires_in, when the provider sends it
    version             integer NOT NULL DEFAULT 1,   -- bumped on every rotation (optimistic checks)
    id_token_hint       bytea,                   -- ciphertext of the last ID token, for RP-initiated logout
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX upstream_grants_key_id ON upstream_grants (key_id);

-- Cached upstream access tokens per account and scope set.
CREATE TABLE upstream_access_tokens (
    account_id      uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    scope_key       text NOT NULL,               -- sorted, space-separated scopes or resource name
    access_token    bytea NOT NULL,              -- ciphertext blob
    key_id          text NOT NULL,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, scope_key)
);
CREATE INDEX upstream_access_tokens_expires ON upstream_access_tokens (expires_at);
CREATE INDEX upstream_access_tokens_key_id ON upstream_access_tokens (key_id);

-- TokenGate sessions: one per (device, account), rotated refresh tokens in one family.
CREATE TABLE sessions (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    device_id                   uuid NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
    account_id                  uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    client_id                   text NOT NULL,
    family_id                   uuid NOT NULL DEFAULT gen_random_uuid(),
    access_token_hash           bytea NOT NULL UNIQUE CHECK (octet_length(access_token_hash) = 32),
    access_expires_at           timestamptz NOT NULL,
    refresh_token_hash          bytea NOT NULL UNIQUE CHECK (octet_length(refresh_token_hash) = 32),
    previous_refresh_token_hash bytea CHECK (octet_length(previous_refresh_token_hash) = 32),
    rotated_at                  timestamptz,      -- start of the replay grace window
    expires_at                  timestamptz NOT NULL,  -- idle expiry, pushed forward on refresh
    absolute_expires_at         timestamptz NOT NULL,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (device_id, account_id)
);
CREATE INDEX sessions_account ON sessions (account_id);
CREATE INDEX sessions_expires ON sessions (expires_at);
CREATE INDEX sessions_previous_refresh ON sessions (previous_refresh_token_hash) WHERE previous_refresh_token_hash IS NOT NULL;

-- Refresh tokens already rotated away, kept to detect reuse (which revokes the family).
CREATE TABLE revoked_refresh_tokens (
    token_hash      bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    family_id       uuid NOT NULL,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX revoked_refresh_tokens_expires ON revoked_refresh_tokens (expires_at);

-- A login between /auth/login and /auth/callback (minutes; single use).
CREATE TABLE pending_logins (
    state_hash          bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
    client_id           text NOT NULL,
    redirect_uri        text NOT NULL,
    app_state           text,
    code_challenge      text NOT NULL,            -- the app's S256 challenge
    provider            text NOT NULL,
    policy              text,
    nonce               text NOT NULL,
    code_verifier       bytea NOT NULL,           -- TokenGate's PKCE verifier toward the IdP, ciphertext
    key_id              text NOT NULL,
    device_id           uuid REFERENCES devices (id) ON DELETE CASCADE,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL
);
CREATE INDEX pending_logins_expires ON pending_logins (expires_at);

-- A one-time code handed to the app after the callback (about a minute; single use), bound to
-- the app's PKCE challenge, client and redirect URI.
CREATE TABLE handoff_codes (
    code_hash           bytea PRIMARY KEY CHECK (octet_length(code_hash) = 32),
    account_id          uuid NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    device_id           uuid REFERENCES devices (id) ON DELETE CASCADE,
    client_id           text NOT NULL,
    redirect_uri        text NOT NULL,
    code_challenge      text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL
);
CREATE INDEX handoff_codes_expires ON handoff_codes (expires_at);
