-- The attempt at a failing provider that one caller of all instances is making now, apart from
-- its backoff window (docs/proxy.md, "When the provider refuses the refresh"). Before, the
-- attempt moved `retry_at` on by its hold (30 s), and an instance that read the row meanwhile
-- kept that hold in memory: after the attempt succeeded, its calls still got 503 for up to the
-- hold. Now `retry_at` stays the window's end; `attempt_until` says someone is asking (until
-- then, if it never answers), and an instance that sees it looks again a second later. Cleared
-- by the attempt's outcome (a success, one failure more) or by its caller when it did not ask.
ALTER TABLE provider_faults ADD COLUMN attempt_until timestamptz;
