-- Live streams end with their session (docs/proxy.md, "Streams end with the session"). Each
-- instance holds the streamed answers it relays (server-sent events, long downloads) under the
-- session whose token opened them, and closes them when that session ends, whatever ends it: a
-- logout, a back-channel logout, a rejected or revoked grant (the account's sessions are
-- suspended or its row removed), the sweeper, another instance, an operator's SQL. A deleted
-- session row says so to every instance: NOTIFY tokengate_session_ended with the session's id,
-- delivered at commit (a cascade from `accounts` or `devices` fires it too).

CREATE FUNCTION tokengate_session_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tokengate_session_ended', OLD.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_ended AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION tokengate_session_ended();
