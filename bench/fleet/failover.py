"""TokenGate through PostgreSQL failovers under Patroni: the fleet's devices (fleet.Load) on two
instances behind nginx, with a Patroni cluster (scripts/patroni.sh) as their database, through a
switchover, a crash of the primary's postmaster and the loss of the primary's node; then the
invariants (fleet.standard_checks, and those of a failover), one table. Run by bench/failover.sh.

    PYTHONPATH=bench/fleet python3 -m failover [--sync] [--devices N] [--runs N]

Each fault is timed twice: by scripts/patroni.sh (from the signal or the switchover command
until the other node accepts writes: Patroni's detection and promotion), and by the devices (the
503 window: from the fault to the last 503 any device got for it).
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import requests

from fleet import Checks, Load, Stack, standard_checks
from fleet.cluster import CLIENT_ID, REPO, UPSTREAM

PATRONI = os.path.join(REPO, "scripts", "patroni.sh")
# The failures a device may meet while the database is away: 503 database_unavailable (with
# Retry-After), and on the browser's leg a callback that could not store the finished login,
# which sends the app `error=server_error` (docs/operations.md, "Database outage"). Anything else
# is a failure of the run.
OUTAGE_STATUSES = {503}


def is_outage(failure: dict) -> bool:
    if failure["status"] in OUTAGE_STATUSES:
        return True
    # A POST the API refused and the device sent once more: an upstream token revoked (a forced
    # call) while the database was away, so no refresh could be stored and announced and the
    # instances still held it; TokenGate retries only idempotent calls itself. Counted only
    # inside a window, as the 503s are.
    if failure["kind"] == "api_post" and failure["status"] == 401 and failure["outcome"] == "retried":
        return True
    return failure["kind"] == "callback" and failure["status"] == 302 and "error=server_error" in (failure["body"] or "")
# Each instance's request deadline (server.request_timeout_seconds): no answer may take longer.
REQUEST_TIMEOUT = 10
# The token endpoint's shared budget per address and minute, for the rate-limit probe.
TOKEN_BUDGET = 60


def say(text: str):
    print(f"[failover {time.strftime('%H:%M:%S')}] {text}", flush=True)


def patroni(*args: str, timeout: float = 180) -> str:
    out = subprocess.run([PATRONI, *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"patroni.sh {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()[-600:]}")
    return out.stdout.strip()


class Probe:
    """One user of its own, signed in on one instance, to check what a failover must not break."""

    def __init__(self, url: str, name: str):
        self.load = Load(url, devices=1, duration=3600)
        self.device = self.load.devices[0]
        self.device.user = f"probe-{name}-{uuid.uuid4().hex[:6]}"
        self.device.http.headers["X-Forwarded-For"] = f"10.78.{len(name)}.{os.getpid() % 250 + 1}"

    def login(self) -> bool:
        return self.device.login()

    def get(self, base: str, path: str) -> int:
        try:
            return requests.get(base + path, headers=self.device.bearer(), timeout=5).status_code
        except requests.RequestException:
            return -1


class CommitProbe(threading.Thread):
    """Commits numbered rows through the multi-host URL, ten a second, each by a psql of its own,
    and notes those acknowledged: after the faults, an acknowledged row missing from the primary
    is a commit the failover lost (asynchronous replication can; synchronous must not)."""

    def __init__(self, url: str):
        super().__init__(name="commit-probe", daemon=True)
        self.url, self.acknowledged, self.stop_event = url, [], threading.Event()

    def psql(self, sql: str) -> subprocess.CompletedProcess:
        return subprocess.run(["psql", self.url, "-qAtX", "-v", "ON_ERROR_STOP=1", "-c", sql], capture_output=True,
                              text=True, timeout=15)

    def run(self):
        self.psql("CREATE TABLE IF NOT EXISTS failover_commits (n integer PRIMARY KEY)")
        n = 0
        while not self.stop_event.is_set():
            n += 1
            try:
                if self.psql(f"INSERT INTO failover_commits VALUES ({n})").returncode == 0:
                    self.acknowledged.append(n)
            except subprocess.TimeoutExpired:
                pass
            self.stop_event.wait(0.1)

    def lost(self) -> list:
        self.stop_event.set()
        self.join(20)
        present = {int(line) for line in self.psql("SELECT n FROM failover_commits").stdout.split()}
        return [n for n in self.acknowledged if n not in present]


def outage_windows(load: Load, faults: list) -> list:
    """For each fault (name, started at, seconds until writable): the 503s the devices got from
    its start until the next fault (or the end), and the window from the start to the last."""
    windows = []
    for index, (name, started, writable) in enumerate(faults):
        until = faults[index + 1][1] if index + 1 < len(faults) else float("inf")
        hits = [f for f in load.failures if is_outage(f) and started - 0.5 <= f["t"] < until]
        last = max((f["t"] for f in hits), default=started)
        windows.append({"fault": name, "started": started, "writable_after": writable, "503s": len(hits),
                        "window": round(max(0.0, last - started), 2)})
    return windows


def failover_checks(stack: Stack, load: Load, faults: list, probes: dict) -> Checks:
    base = standard_checks(stack, load)
    checks = Checks()
    windows = outage_windows(load, faults)
    in_window = set()
    for w in windows:
        until = w["started"] + w["window"] + 0.01
        for i, f in enumerate(load.failures):
            if is_outage(f) and w["started"] - 0.5 <= f["t"] <= until:
                in_window.add(i)
    # The fleet's three request rows count every 503; here the 503s of the windows are the
    # measured outage, and only what falls outside them (or is not a 503) fails the run.
    replaced = {"failed idempotent requests", "failed non-idempotent requests (after the app's retries)",
                "first attempts the app had to retry", "logouts or transfers that did not stick"}
    outside = [f for i, f in enumerate(load.failures) if i not in in_window and f["outcome"] in ("failed", "retried")]
    checks.add("failed or retried requests outside the 503 windows", len(outside),
               note=(f"{outside[0]['kind']} {outside[0]['status']} {outside[0]['error'] or outside[0]['body'][:80]}"
                     if outside else ""))
    checks.add("requests failed with 503 inside the windows (GETs, login callbacks: not retried)",
               sum(1 for i in in_window if load.failures[i]["outcome"] == "failed"), bound=None)
    checks.add("requests retried inside the windows (POSTs: after a 503, or an API's 401)",
               sum(1 for i in in_window if load.failures[i]["outcome"] == "retried"), bound=None)
    for row in base.rows:
        if row[0] not in replaced:
            checks.rows.append(row)
        if row[0] == "logouts or transfers that did not stick":
            # A check of old credentials that met the outage (503) could not run; one answered
            # otherwise than 401 / invalid_grant is a logout that did not stick.
            checks.add(row[0] + " (checks answered, not 503 in a window)",
                       sum(1 for i, f in enumerate(load.failures)
                           if f["kind"] in ("after_logout", "after_transfer") and i not in in_window))
    slowest = load.latencies()["max_ms"] / 1000
    checks.add(f"slowest answer (s), deadline {REQUEST_TIMEOUT} s", round(slowest, 2), bound=REQUEST_TIMEOUT + 0.5)
    for w in windows:
        bound = round(w["writable_after"] + 2, 2)
        checks.add(f"503 window after {w['fault']} (s)", w["window"], bound=bound,
                   note=f"writable after {w['writable_after']} s; {w['503s']} answers 503")
    for name, (value, bound, note) in probes.items():
        checks.add(name, value, bound=bound, note=note)
    return checks


def probe_after_failover(stack: Stack) -> dict:
    """What must work again once the new primary is up, probed on both instances."""
    a, b = stack.instances[0].url, stack.instances[1].url
    results = {}

    # A logout on A ends the session B holds in memory (B's LISTEN connection must have followed
    # the primary), within a bound.
    probe = Probe(a, "logout")
    if not probe.login():
        results["probe sign-in after the failover"] = (1, 0, "could not sign in")
        return results
    path = f"/api/{UPSTREAM}/items/probe"
    warm = probe.get(b, path)
    started = time.monotonic()
    logout = requests.post(a + "/auth/logout", headers=probe.device.bearer(), timeout=10).status_code
    seen = None
    while time.monotonic() - started < 10:
        if probe.get(b, path) == 401:
            seen = time.monotonic() - started
            break
        time.sleep(0.05)
    results["logout on A: seconds until B refuses the session"] = (
        round(seen, 2) if seen is not None else 99, 2, f"B served it before: {warm}; logout: {logout}")

    # The revocation queue: the logged-out grant reaches the provider's /revoke and leaves the queue.
    user = probe.device.user
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        stats = stack.provider_stats()
        queued = int(stack.psql("SELECT count(*) FROM upstream_revocations")[0][0])
        if user not in stats.get("live_subjects", []) and queued == 0:
            break
        time.sleep(0.25)
    stats = stack.provider_stats()
    queued = int(stack.psql("SELECT count(*) FROM upstream_revocations")[0][0])
    results["logged-out grant still live at the provider or queued"] = (
        int(user in stats.get("live_subjects", [])) + queued, 0, "after 20 s")

    # The shared rate limit: one address spends the token endpoint's budget on A and B together.
    address = f"10.79.{os.getpid() % 250}.{int(time.time()) % 250 + 1}"
    admitted = refused = other = 0
    for i in range(TOKEN_BUDGET + 20):
        url = (a if i % 2 == 0 else b) + "/auth/token"
        try:
            status = requests.post(url, data={"grant_type": "refresh_token", "refresh_token": "x" * 43, "client_id": CLIENT_ID},
                                   headers={"X-Forwarded-For": address}, timeout=10).status_code
        except requests.RequestException:
            status = -1
        if status == 429:
            refused += 1
        elif status == 400:
            admitted += 1
        else:
            other += 1
    results[f"token requests admitted past the shared budget ({TOKEN_BUDGET}) on A+B"] = (
        max(0, admitted - TOKEN_BUDGET), 0, f"admitted {admitted}, refused {refused}, other {other}")
    results["token requests of the probe refused (shared limit works)"] = (
        0 if refused >= 20 else 1, 0, f"{refused} of {TOKEN_BUDGET + 20} refused")
    return results


def run_once(args, number: int) -> int:
    work = os.environ.get("FLEET_WORK")
    cluster_dir = os.path.join(work, f"patroni-{number}")
    say(f"run {number}: Patroni cluster{' (synchronous_mode)' if args.sync else ''}")
    # Longer than the script's own waits (60 s for the first leader, 120 s for the replica), so
    # that a cluster that does not come up fails there, with the tail of its nodes' logs.
    url = patroni("start", cluster_dir, str(args.base_port), *(["--sync"] if args.sync else []), timeout=240)
    say(f"database: {url}")
    try:
        settings = (f"request_timeout_seconds: {REQUEST_TIMEOUT}, token_rate_limit_per_minute: {TOKEN_BUDGET}")
        os.makedirs(os.path.join(work, f"stack-{number}"), exist_ok=True)
        with Stack(instances=2, nginx=True, database_url=url, work=os.path.join(work, f"stack-{number}"),
                   settings=settings) as stack:
            stack.start()
            say(f"2 instances behind nginx at {stack.entry_url}; {args.devices} devices")
            load = Load(stack.entry_url, devices=args.devices, duration=3600, timeout=REQUEST_TIMEOUT + 5).start()
            commits = CommitProbe(url)
            commits.start()
            faults = []
            try:
                time.sleep(args.warmup)
                for fault in args.faults:
                    patroni("wait", cluster_dir, "120")
                    time.sleep(2)
                    started = load.elapsed()
                    out = patroni(fault, cluster_dir)
                    writable = float(out.split()[0])
                    faults.append((fault, started, writable))
                    say(f"{fault}: a node accepts writes after {writable:.2f} s ({out})")
                    time.sleep(args.recovery)
                patroni("wait", cluster_dir, "120")
                probes = probe_after_failover(stack)
                lost = commits.lost()
                probes["acknowledged commits lost by the failovers"] = (
                    len(lost), 0 if args.sync else None,
                    f"{len(commits.acknowledged)} acknowledged" + (f"; lost: {lost[:8]}" if lost else ""))
                time.sleep(2)
            finally:
                load.stop()
                load.join(timeout=120)
            time.sleep(1.0)
            checks = failover_checks(stack, load, faults, probes)
            summary = load.summary()
            say(f"load: {summary['devices']} devices, {summary['seconds']} s; "
                f"{sum(n for k, n in summary['outcomes'].items() if k.endswith('.ok'))} answers as expected")
            for failure in [f for f in load.failures if not is_outage(f)][:8]:
                print("  not a 503:", str(failure)[:300])
                # What the device did just before (time, kind, status, instance): what a rare
                # failure needs to be understood from CI's log alone.
                print("    the device's last answers:", failure.get("recent"))
            for failure in [f for f in load.failures if f["kind"] in ("after_logout", "after_transfer")][:4]:
                print("  a check of old credentials:", str(failure)[:300])
            print(checks.table(), flush=True)
            if checks.failed:
                say(f"run {number}: FAILED: {len(checks.failed)} invariant(s)")
                return 1
            say(f"run {number}: every invariant held")
            return 0
    finally:
        patroni("stop", cluster_dir)


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="failover")
    parser.add_argument("--sync", action="store_true", help="Patroni's synchronous_mode")
    parser.add_argument("--devices", type=int, default=12)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=12)
    parser.add_argument("--recovery", type=float, default=15)
    parser.add_argument("--base-port", type=int, default=55500)
    parser.add_argument("--faults", default="switchover,kill-primary,kill-node")
    args = parser.parse_args(argv)
    args.faults = args.faults.split(",")
    status = 0
    for number in range(1, args.runs + 1):
        status |= run_once(args, number)
    return status


if __name__ == "__main__":
    # SIGTERM (bench/failover.sh's timeout) unwinds like Ctrl-C: the Stack and the cluster stop.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    sys.exit(main(sys.argv[1:]))
