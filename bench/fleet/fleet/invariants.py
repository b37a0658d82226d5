"""What must hold after a fleet run, as a table; `Checks.failed` when any row does not.

    from fleet.invariants import Checks, standard_checks
    checks = standard_checks(stack, load)      # the rows every scenario shares
    checks.add("my invariant", value, bound=0) # more rows: value must be <= bound (or == when exact)
    print(checks.table()); sys.exit(1 if checks.failed else 0)
"""

import json
import re

IDEMPOTENT = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}
# What a TokenGate log says when a fault ended a session or a grant, and when it could not open a
# sealed blob (every error reaches the one catch site as `unhandled error` with its type).
FAULT_MESSAGES = ("the provider rejected an account's grant", "refresh token reuse", "handoff code presented twice",
                  "transfer code presented twice")
DECRYPT = re.compile(r"CryptoError|decryption failed|unknown key ID", re.IGNORECASE)


class Checks:
    def __init__(self):
        self.rows = []  # (name, value, bound, exact, ok, note)

    def add(self, name: str, value, bound=0, exact: bool = False, note: str = "", holds: bool = None):
        """A row that holds when value <= bound (exact: value == bound). bound None: information
        only. `holds` decides instead, when given (a bound with a condition of its own)."""
        if holds is not None:
            ok = holds
        elif bound is None:
            ok = True
        elif exact:
            ok = value == bound
        else:
            ok = value <= bound
        self.rows.append((name, value, bound, exact, ok, note))
        return ok

    @property
    def failed(self) -> list:
        return [r for r in self.rows if not r[4]]

    def table(self) -> str:
        width = max(len(r[0]) for r in self.rows) if self.rows else 10
        lines = [f"{'invariant':<{width}}  {'value':>10}  {'bound':>10}  result", "-" * (width + 36)]
        for name, value, bound, exact, ok, note in self.rows:
            shown = "-" if bound is None else (f"== {bound}" if exact else f"<= {bound}")
            result = "FAILED" if not ok else "info" if bound is None else "ok"
            lines.append(f"{name:<{width}}  {value!s:>10}  {shown:>10}  {result}{'  ' + note if note else ''}")
        return "\n".join(lines)


def log_findings(stack) -> dict:
    """Counts over every instance's logs (every generation): error lines, decrypt failures, fault
    messages, and the drain lines of each generation."""
    errors, decrypts, faults = [], 0, {m: 0 for m in FAULT_MESSAGES}
    for instance in stack.instances:
        for line in instance.log_lines():
            text = str(line)
            if DECRYPT.search(text):
                decrypts += 1
            message = line.get("message", line.get("raw", ""))
            for m in FAULT_MESSAGES:
                if message.startswith(m):
                    faults[m] += 1
            if line.get("level") in ("error", "critical") or "raw" in line and "error" in line["raw"].lower():
                errors.append(f"instance {instance.index}: {text[:240]}")
    return {"errors": errors, "decrypts": decrypts, "faults": faults}


def _json_or_none(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None


def drain_report(stack) -> list:
    """For every stop by SIGTERM: (instance, start number, exit code, logged `shutting down`,
    logged `stopped`, requests in flight when the signal came (None when not logged))."""
    report = []
    for instance in stack.instances:
        sigterms = iter(i for i, (how, _) in enumerate(instance.exits) if how == "SIGTERM")
        for number in sigterms:
            path = instance.logs[number]
            messages = []
            with open(path, errors="replace") as f:
                for line in f:
                    messages.append(line)
            text = "".join(messages)
            in_flight = next((int(line["in_flight"]) for line in map(_json_or_none, messages)
                              if line and line.get("message") == "shutting down" and "in_flight" in line), None)
            report.append((instance.index, number + 1, instance.exits[number][1], '"shutting down"' in text,
                           '"stopped"' in text, in_flight))
    return report


def standard_checks(stack, load, provider: dict = None, counts: dict = None) -> Checks:
    checks = Checks()
    failures = load.failures
    failed = [f for f in failures if f["outcome"] == "failed"]
    checks.add("failed idempotent requests", sum(1 for f in failed if f["method"] in IDEMPOTENT))
    checks.add("failed non-idempotent requests (after the app's retries)", sum(1 for f in failed if f["method"] not in IDEMPOTENT))
    checks.add("first attempts the app had to retry", sum(1 for f in failures if f["outcome"] == "retried"))
    checks.add("users asked to sign in again", sum(1 for f in failures if f["outcome"] == "signin_again"))
    checks.add("rotated refresh tokens refused (lost writes)",
               sum(1 for f in failures if f["kind"] in ("refresh", "final_refresh") and f["outcome"] == "signin_again"))
    checks.add("logouts or transfers that did not stick",
               sum(1 for f in failures if f["kind"] in ("after_logout", "after_transfer")))
    provider = provider or stack.provider_stats()
    checks.add("upstream refresh tokens reused at the provider", provider["reuses"])
    checks.add("revoked upstream refresh tokens presented", provider["revoked_refresh_presented"])
    checks.add("unknown upstream refresh tokens presented", provider["unknown_refresh_presented"])
    counts = counts or stack.table_counts()
    stale = int(stack.psql("SELECT count(*) FROM accounts WHERE state <> 'active'")[0][0])
    findings = log_findings(stack)
    ended = sum(findings["faults"].values())
    checks.add("sessions ended by a fault (stale accounts + log lines)", stale + ended,
               note=", ".join(f"{k}: {v}" for k, v in findings["faults"].items() if v))
    users = len(load.signed_in_users())
    checks.add("signed-in users (devices holding a session)", users, bound=None)
    checks.add("upstream grants in the database == signed-in users", counts["upstream_grants"], bound=users, exact=True)
    checks.add("accounts in the database == signed-in users", counts["accounts"], bound=users, exact=True)
    checks.add("live grants at the provider == signed-in users", provider["live_grants"], bound=users, exact=True)
    checks.add("failed decrypts in the instances' logs", findings["decrypts"])
    checks.add("error lines in the instances' logs", len(findings["errors"]),
               note=findings["errors"][0][:160] if findings["errors"] else "")
    outcomes = load.summary()["outcomes"]
    checks.add("requests answered as expected", sum(n for k, n in outcomes.items() if k.endswith(".ok")), bound=None)
    checks.add("upstream refreshes at the provider", provider["refreshes"], bound=None)
    checks.add("forced upstream refreshes (API 401)", provider["api"]["forced_invalidations"], bound=None)
    checks.add("API 401s to tokens TokenGate held (retried by it)", provider["api"]["unauthorized_unexpected"], bound=None)
    return checks
