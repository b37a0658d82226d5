-- A login may be a step-up (docs/proxy.md, "Step-up"): what the sign-in must prove (RFC 9470
-- `acr_values`, `max_age`), the account it must be, and the API whose token it is for. The
-- callback checks the ID token against them; none of them is a secret.
ALTER TABLE pending_logins
  ADD COLUMN acr_values text,
  ADD COLUMN max_age integer,
  ADD COLUMN step_up_account uuid,
  ADD COLUMN step_up_resource text;
