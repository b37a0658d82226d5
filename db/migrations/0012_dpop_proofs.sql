-- The DPoP proofs accepted lately (RFC 9449 §11.1), shared by every instance: a proof is
-- accepted once, whichever instance it reaches (docs/architecture.md, "DPoP"). `proof_key` is 16
-- bytes of SHA-256 over the key's thumbprint and the proof's `jti`; a row is kept until the
-- proof's `iat` is too old to be accepted, and the sweeper removes it after that.
--
-- UNLOGGED, like rate_limit_buckets: written on every call with a bound token, so no WAL and
-- no flush at commit. It survives restarts of TokenGate and a clean restart of PostgreSQL; a
-- PostgreSQL crash or a failover to a replica empties it, after which a proof accepted in the
-- last `dpop.proof_max_age_seconds` before it could be accepted once more (docs/threat_model.md).
CREATE UNLOGGED TABLE dpop_proofs (
    proof_key       bytea PRIMARY KEY,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX dpop_proofs_expires_at ON dpop_proofs (expires_at);
