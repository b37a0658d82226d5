-- OpenID Shared Signals Framework 1.0 receiver (docs/architecture.md, "Shared Signals").
--
-- The `jti` of every security event token (RFC 8417) a provider pushed and TokenGate accepted,
-- shared by all instances, until the token would be refused as too old anyway (`expires_at`; the
-- sweeper removes it then). As for logout tokens, the insert decides: of two instances given one
-- token at once, one inserts the row and the other finds it (a replay).
CREATE TABLE security_event_token_ids (
    provider        text NOT NULL,
    jti             text NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (provider, jti)
);
CREATE INDEX security_event_token_ids_expires ON security_event_token_ids (expires_at);
