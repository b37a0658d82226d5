-- A replaced upstream access token tells every instance to drop what it holds for the account,
-- as a deleted one does (migration 0003). Without it an instance kept serving the token another
-- instance had replaced, typically after an API refused it (401, a forced refresh there): its
-- idempotent calls got the stored token after a 401 of their own, but a POST was answered 401
-- (bench/failover.sh, two instances behind nginx).
CREATE TRIGGER upstream_access_tokens_invalidate_replace AFTER UPDATE ON upstream_access_tokens
    FOR EACH ROW WHEN (OLD.access_token IS DISTINCT FROM NEW.access_token)
    EXECUTE FUNCTION tokengate_invalidate_account();
