"""A provider that refuses TokenGate's client, the way ops meet it (docs/proxy.md, "When the provider
refuses the refresh"): under load, the provider stops accepting TokenGate's client secret (it
expired), then takes it again (someone renewed it); then the same with glewlwyd's answer to a wrong
secret, 400 and an empty body, which TokenGate cannot tell from a revoked grant without asking the
revocation endpoint about the client alone.

    python3 -m fleet client [--devices N]

What must hold: nobody is asked to sign in again, no account goes stale, no grant is lost, the
provider is asked a handful of times per outage (once per backoff window for all instances, not
once per grant), calls that need a refresh get 503 `idp_unavailable` meanwhile and nothing else
fails, and within one backoff window of the provider accepting again every call works.
"""

import time

from .cluster import PROVIDER_CLIENT_SECRET, Stack
from .devices import Load
from .invariants import log_findings, standard_checks
from .scenarios import finish, print_load, say, settle

# Error lines the scenario causes on purpose.
EXPECTED_ERRORS = ("the identity provider refuses TokenGate's client",)
# standard_checks' rows this scenario replaces with its own, outage-aware ones.
REPLACED = ("failed idempotent requests", "failed non-idempotent requests (after the app's retries)",
            "first attempts the app had to retry", "error lines in the instances' logs",
            "live grants at the provider == signed-in users")


def client(devices: int = 24, warmup: float = 15, outage: float = 45, recovery: float = 45, **stack_options) -> int:
    phases = [("expired secret (401 invalid_client)", {}),
              ("wrong secret, glewlwyd's answer (400, empty body)", {"refused_client_status": 400})]
    with Stack(instances=2, **stack_options) as stack:
        stack.start()
        say(f"2 instances behind nginx at {stack.entry_url}; {devices} devices; upstream tokens live {stack.access_ttl} s")
        total = warmup + len(phases) * (outage + recovery)
        load = Load(stack.entry_url, devices=devices, duration=total + 60).start()
        windows = []  # (label, start, end, provider stats before, at the end, after the recovery)
        try:
            time.sleep(warmup)
            for label, extra in phases:
                before = stack.provider_stats()
                start = load.elapsed()
                say(f"the provider refuses TokenGate's client for {outage:.0f} s: {label}")
                stack.provider_control(client_secret="expired-" + PROVIDER_CLIENT_SECRET, **extra)
                time.sleep(outage)
                refused = stack.provider_stats()
                stack.provider_control(client_secret=PROVIDER_CLIENT_SECRET, refused_client_status=0)
                end = load.elapsed()
                say(f"the provider accepts TokenGate's client again; {recovery:.0f} s to recover")
                time.sleep(recovery)
                windows.append((label, start, end, before, refused))
        finally:
            settle(load, stack)
        print_load(load, stack)
        checks = standard_checks(stack, load)
        checks.rows = [row for row in checks.rows if row[0] not in REPLACED]
        failures = load.failures
        unavailable = [f for f in failures if f["status"] == 503 and "idp_unavailable" in (f["body"] or "")]
        def refused(f):
            return any(start <= f["t"] <= end + recovery for _, start, end, _, _ in windows)
        # A login while the client is refused cannot redeem its code: the app is sent back with an
        # error and signs in later. Not a session lost, and not avoidable.
        logins = [f for f in failures if f["kind"] == "callback" and refused(f)]
        # A POST is not retried: when the API refused its token (the fake API revokes one on
        # demand) and no new one can be had, or the last valid one expired on the way, the API's
        # 401 reaches the app, which is what it said.
        posts = [f for f in failures if f["kind"] == "api_post" and f["status"] == 401 and refused(f)]
        others = [f for f in failures
                  if f not in unavailable and f not in logins and f not in posts and f["outcome"] in ("failed", "retried")]
        checks.add("logins that could not finish while the client was refused", len(logins), bound=None)
        checks.add("POSTs answered the API's 401 while no new token could be had", len(posts), bound=None)
        checks.add("failed requests other than 503 idp_unavailable", len(others),
                   note=str(others[0])[:160] if others else "")
        # Whole, with what the device did just before: what a rare failure needs to be understood
        # from CI's log alone.
        for failure in others[:4]:
            print("  not an idp_unavailable:", {k: v for k, v in failure.items() if k != "provider_history"})
        for label, start, end, before, after in windows:
            during = [f for f in unavailable if start <= f["t"] <= end + recovery]
            last = max((f["t"] for f in during), default=end)
            checks.add(f"{label}: 503 idp_unavailable answers", len(during), bound=None)
            checks.add(f"{label}: refreshes the provider refused",
                       after["invalid_client_refresh"] - before["invalid_client_refresh"], bound=10,
                       note="one per backoff window of the provider (2, 4, 8, 16, 32 s), not one per grant")
            checks.add(f"{label}: seconds from the provider accepting to the last 503", round(max(0.0, last - end), 1),
                       bound=recovery - 5, note="at most one backoff window")
        queued = int(stack.psql("SELECT count(*) FROM upstream_revocations")[0][0])
        users = len(load.signed_in_users())
        checks.add("live grants at the provider == signed-in users + revocations still queued",
                   stack.provider_stats()["live_grants"], bound=users + queued, exact=True,
                   note="a logout while the client was refused queues its revocation; the sweeper retries it")
        findings = log_findings(stack)
        unexpected = [e for e in findings["errors"] if not any(m in e for m in EXPECTED_ERRORS)]
        checks.add("error lines naming the refused client", len(findings["errors"]) - len(unexpected), bound=None,
                   holds=len(findings["errors"]) > len(unexpected))
        checks.add("other error lines in the instances' logs", len(unexpected), note=unexpected[0][:160] if unexpected else "")
        return finish(checks, stack)
