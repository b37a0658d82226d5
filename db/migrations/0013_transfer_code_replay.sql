-- A redeemed transfer code keeps its answer, sealed, for the replay grace window
-- (sessions.refresh_replay_grace_seconds), as a rotated refresh token does (docs/architecture.md,
-- "Transfer codes"): the app that lost the answer, or sent its request twice, presents the code
-- again with its verifier and gets the same answer instead of losing the sessions it moved. The
-- sweeper clears it once the window has passed.
ALTER TABLE transfer_codes ADD COLUMN replay_response bytea;
