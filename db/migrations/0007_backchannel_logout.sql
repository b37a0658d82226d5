-- OpenID Connect Back-Channel Logout 1.0 (docs/architecture.md, "Back-channel logout").
--
-- The provider's session id (`sid` of the login's ID token), carried from the handoff code to the
-- session it starts, so that a logout token naming it ends those sessions (and a login still to be
-- redeemed). NULL when the provider sends no `sid`, and for rows from before this migration.
ALTER TABLE handoff_codes ADD COLUMN provider_sid text;
ALTER TABLE sessions ADD COLUMN provider_sid text;
CREATE INDEX sessions_provider_sid ON sessions (provider_sid) WHERE provider_sid IS NOT NULL;
CREATE INDEX handoff_codes_provider_sid ON handoff_codes (provider_sid) WHERE provider_sid IS NOT NULL;

-- The `jti` of every logout token accepted, shared by all instances, until the token would be
-- refused as too old anyway (`expires_at`; the sweeper removes it then). The insert decides: of
-- two instances given one token at once, one inserts the row and the other finds it (a replay).
CREATE TABLE logout_token_ids (
    provider        text NOT NULL,
    jti             text NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (provider, jti)
);
CREATE INDEX logout_token_ids_expires ON logout_token_ids (expires_at);
