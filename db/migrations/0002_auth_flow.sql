-- The mobile auth flow: what the first schema lacked.

-- The issuer of the authority a pending login went to (RFC 9207 `iss` check at the callback).
ALTER TABLE pending_logins ADD COLUMN issuer text NOT NULL DEFAULT '';
ALTER TABLE pending_logins ALTER COLUMN issuer DROP DEFAULT;

-- A handoff code stays (until it expires) after its redemption, so that presenting it again is
-- recognised as a replay and ends the session it created (RFC 6749 §4.1.2).
ALTER TABLE handoff_codes ADD COLUMN redeemed_at timestamptz;
ALTER TABLE handoff_codes ADD COLUMN session_id uuid;

-- The last token answer of a session, sealed (AES-256-GCM, names its key id), kept only for the
-- replay grace window so that a retry after a lost response gets the same answer (docs/architecture.md, "Refresh rotation").
ALTER TABLE sessions ADD COLUMN replay_response bytea;
ALTER TABLE sessions ADD COLUMN last_used_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX sessions_device ON sessions (device_id);
CREATE INDEX sessions_family ON sessions (family_id);
CREATE INDEX sessions_absolute_expires ON sessions (absolute_expires_at);
CREATE INDEX pending_logins_key_id ON pending_logins (key_id);
CREATE INDEX handoff_codes_account ON handoff_codes (account_id);
