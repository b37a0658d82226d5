-- DPoP (RFC 9449) on the app leg (docs/architecture.md, "DPoP").
--
-- The RFC 7638 thumbprint of the key a session's tokens are bound to (`cnf.jkt`): every use of
-- its access token and every refresh must come with a proof signed by that key. NULL: bearer.
ALTER TABLE sessions ADD COLUMN dpop_jkt text CHECK (dpop_jkt IS NULL OR octet_length(dpop_jkt) = 43);
