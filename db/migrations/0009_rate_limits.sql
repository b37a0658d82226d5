-- Rate limits shared by every instance (docs/scaling.md, "Rate limits").
--
-- One token bucket per limit (`scope`) and client address: `tokens` as of `updated_at`, refilled
-- at the limit's rate up to its capacity (a minute's allowance). An instance takes a few tokens at
-- a time (a lease) and spends them from memory, and takes for many addresses in one statement,
-- so most requests cost no statement. A missing row is a full bucket: a row untouched for a
-- minute would be full again and carries no information, and the sweeper removes it.
-- `granted` is what the last take got (the statement's answer: RETURNING sees only new values).
--
-- UNLOGGED: no WAL for a table written at every take. It survives restarts of TokenGate and a
-- clean restart of PostgreSQL; a PostgreSQL crash or a failover to a replica empties it, which
-- gives every client a full minute's allowance once (docs/scaling.md). No index but the key, and
-- room on each page: a take updates a row in place (a HOT update, no index entry).
CREATE UNLOGGED TABLE rate_limit_buckets (
    scope           text NOT NULL,
    client          text NOT NULL,
    tokens          double precision NOT NULL,
    updated_at      timestamptz NOT NULL,
    granted         integer NOT NULL,
    PRIMARY KEY (scope, client)
) WITH (fillfactor = 70);
