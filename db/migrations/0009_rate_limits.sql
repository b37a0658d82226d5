-- Issue 18, item 1: rate limits shared by every instance (docs/scaling.md, "Rate limits").
--
-- One token bucket per limit and client address: `tokens` as of `updated_at`, refilled at the
-- limit's rate up to its capacity (a minute's allowance). An instance takes a few tokens at a
-- time (a lease) and spends them from memory, so most requests cost no statement. A missing row is
-- a full bucket: a row whose refill would have filled it (untouched for a minute) carries no
-- information, and the sweeper removes it.
--
-- UNLOGGED: no WAL for a table written on every lease. It survives restarts of TokenGate and a
-- clean restart of PostgreSQL; a PostgreSQL crash or a failover to a replica empties it, which
-- gives every client a full minute's allowance once (docs/scaling.md).
CREATE UNLOGGED TABLE rate_limit_buckets (
    scope           text NOT NULL,
    client          text NOT NULL,
    tokens          double precision NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (scope, client)
);
CREATE INDEX rate_limit_buckets_updated ON rate_limit_buckets (updated_at);

-- Takes up to `want` whole tokens from the bucket, refilled to `at` first (never backwards: an
-- instance whose clock is behind refills nothing). Returns how many it took and what is left.
-- The row lock orders instances taking from one bucket at once.
CREATE FUNCTION take_rate_limit_tokens(
    p_scope text, p_client text, p_want integer, p_capacity double precision,
    p_per_second double precision, p_at timestamptz,
    OUT granted integer, OUT remaining double precision
) LANGUAGE plpgsql AS $$
DECLARE
    stored double precision;
    stamp timestamptz;
BEGIN
    INSERT INTO rate_limit_buckets (scope, client, tokens, updated_at)
    VALUES (p_scope, p_client, p_capacity, p_at)
    ON CONFLICT (scope, client) DO NOTHING;
    SELECT b.tokens, b.updated_at INTO stored, stamp
    FROM rate_limit_buckets b WHERE b.scope = p_scope AND b.client = p_client FOR UPDATE;
    remaining := LEAST(p_capacity, stored + GREATEST(0, EXTRACT(EPOCH FROM p_at - stamp)) * p_per_second);
    granted := LEAST(p_want, floor(remaining))::integer;
    remaining := remaining - granted;
    UPDATE rate_limit_buckets SET tokens = remaining, updated_at = GREATEST(stamp, p_at)
    WHERE scope = p_scope AND client = p_client;
END
$$;
