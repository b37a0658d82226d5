-- Re-link after the app loses its Keychain (docs/architecture.md, "Transfer codes").
--
-- A signed-in app asks for a transfer code and keeps it, with the PKCE-style verifier whose
-- challenge is stored here, somewhere that survives an app transfer or a restore without the
-- Keychain. A fresh install redeems it once at the token endpoint: the accounts it names that
-- still have a live session and grant on the issuing device get new sessions on a new device,
-- and the issuing device's sessions end. The code is stored only as its SHA-256. A redeemed row
-- stays until it expires: presenting the code again ends what its redemption created.
CREATE TABLE transfer_codes (
    code_hash           bytea PRIMARY KEY CHECK (octet_length(code_hash) = 32),
    client_id           text NOT NULL,
    device_id           uuid REFERENCES devices (id) ON DELETE SET NULL,  -- the device it was issued on
    account_ids         uuid[] NOT NULL,                                  -- that device's accounts then
    code_challenge      text NOT NULL,                                    -- S256 of the app's verifier
    failed_attempts     integer NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL,
    redeemed_at         timestamptz,
    redeemed_device_id  uuid REFERENCES devices (id) ON DELETE SET NULL   -- the device its redemption created
);
CREATE INDEX transfer_codes_device ON transfer_codes (device_id);
CREATE INDEX transfer_codes_redeemed_device ON transfer_codes (redeemed_device_id);
CREATE INDEX transfer_codes_expires ON transfer_codes (expires_at);
