-- The Azure AD B2C policy (user flow) a grant was issued under: its refresh token is
-- redeemed, revoked and logged out at that policy's endpoints, not the provider's default one.
-- NULL for providers without policies and for grants stored before this migration.

ALTER TABLE upstream_grants ADD COLUMN policy text;
