-- Upstream tokens and the proxy: cache coherence across instances.
--
-- Each instance keeps sessions and upstream access tokens in memory. Whatever ends or rotates a
-- session, or removes or stales an account, its grant or a cached token — a logout, a refresh,
-- the sweeper, another instance, an operator's SQL — tells every instance to drop what it holds
-- for that account: NOTIFY tokengate_invalidate with the account id, delivered at commit
-- (duplicates within a transaction are folded by PostgreSQL).

CREATE FUNCTION tokengate_invalidate_account() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tokengate_invalidate', OLD.account_id::text);
    RETURN NULL;
END
$$;

CREATE FUNCTION tokengate_invalidate_account_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tokengate_invalidate', OLD.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_invalidate_delete AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION tokengate_invalidate_account();
CREATE TRIGGER sessions_invalidate_rotate AFTER UPDATE ON sessions
    FOR EACH ROW WHEN (OLD.access_token_hash IS DISTINCT FROM NEW.access_token_hash)
    EXECUTE FUNCTION tokengate_invalidate_account();
CREATE TRIGGER upstream_grants_invalidate_delete AFTER DELETE ON upstream_grants
    FOR EACH ROW EXECUTE FUNCTION tokengate_invalidate_account();
CREATE TRIGGER upstream_access_tokens_invalidate_delete AFTER DELETE ON upstream_access_tokens
    FOR EACH ROW EXECUTE FUNCTION tokengate_invalidate_account();
CREATE TRIGGER accounts_invalidate_delete AFTER DELETE ON accounts
    FOR EACH ROW EXECUTE FUNCTION tokengate_invalidate_account_row();
CREATE TRIGGER accounts_invalidate_stale AFTER UPDATE ON accounts
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state <> 'active')
    EXECUTE FUNCTION tokengate_invalidate_account_row();
