"""The fleet's scenarios: each builds a Stack, runs a Load through a fault, prints the invariant
table and returns the exit code (0: every invariant held).

    python3 -m fleet rolling [--devices N]          rolling restarts and a key rotation under load
    python3 -m fleet soak MINUTES [--devices N]     steady load on 2 instances, sampled; slopes
    python3 -m fleet smoke [SECONDS]                the load on 3 instances, no fault (a harness check)
    python3 -m fleet client [--devices N]           the provider refuses TokenGate's client, then takes it again
"""

import base64
import json
import os
import secrets
import signal
import sys
import threading
import time

from .cluster import Stack
from .devices import Load
from .invariants import Checks, drain_report, standard_checks


def say(text: str):
    print(f"[fleet {time.strftime('%H:%M:%S')}] {text}", flush=True)


def settle(load: Load, stack: Stack):
    """Ends the load (the devices' final checks run against the live instances) and gives the
    instances a moment to finish what the last requests started (revocations)."""
    load.stop()
    load.join(timeout=120)
    time.sleep(1.0)


def print_load(load: Load, stack: Stack = None):
    summary = load.summary()
    if stack is not None:
        with open(os.path.join(stack.work, "load.json"), "w") as f:
            json.dump(summary, f, indent=1)
    say(f"load: {summary['devices']} devices, {summary['seconds']} s")
    for name, n in summary["outcomes"].items():
        print(f"  {name:<36} {n}")
    print("  latency (ms)                          count    p50    p90    p99    max")
    for kind, l in list(summary["latency"].items()) + [("all", summary["latency_all"])]:
        print(f"  {kind:<36} {l['count']:>6} {l['p50_ms']:>6} {l['p90_ms']:>6} {l['p99_ms']:>6} {l['max_ms']:>6}")
    for failure in summary["failures"][:12]:
        print("  failure:", json.dumps(failure)[:400])
    if len(summary["failures"]) > 12:
        print(f"  … and {len(summary['failures']) - 12} more failures")


def finish(checks: Checks, stack: Stack) -> int:
    print(checks.table(), flush=True)
    nginx = stack.nginx_error_log() if stack.use_nginx else ""
    if nginx.strip():
        lines = nginx.strip().splitlines()
        say(f"nginx error.log: {len(lines)} lines; the last:")
        for line in lines[-8:]:
            print("  " + line)
    if checks.failed:
        say(f"FAILED: {len(checks.failed)} invariant(s)")
        return 1
    say("every invariant held")
    return 0


def smoke(seconds: float = 30, devices: int = 12, **stack_options) -> int:
    with Stack(instances=3, **stack_options) as stack:
        stack.start()
        say(f"3 instances behind nginx at {stack.entry_url}; {devices} devices for {seconds:.0f} s")
        load = Load(stack.entry_url, devices=devices, duration=seconds, history=stack.provider_history).start()
        load.join(timeout=seconds + 120)
        settle(load, stack)
        print_load(load, stack)
        return finish(standard_checks(stack, load), stack)


def new_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def rolling(devices: int = 24, warmup: float = 10, pause: float = 11, grace: int = 10, **stack_options) -> int:
    """Three instances behind nginx under load: a rolling restart that adds key k2, one that makes
    it current, `tokengate keys rotate`, then (after the replay grace) a roll without k1 — the
    procedure of docs/operations.md, "Key rotation" — each instance stopped with SIGTERM (a drain)
    and its replacement ready before the next one stops. `pause`: seconds after each replacement
    is ready before the next instance stops: nginx takes a server that refused a connection out
    of rotation for its `fail_timeout` (10 s by default), so a roll faster than that takes every
    server out at once (docs/scaling.md, "Rolling restart and key rotation")."""
    sessions = f"refresh_replay_grace_seconds: {grace}"
    with Stack(instances=3, sessions=sessions, **stack_options) as stack:
        stack.start()
        say(f"3 instances behind nginx at {stack.entry_url}; {devices} devices")
        load = Load(stack.entry_url, devices=devices, duration=900, history=stack.provider_history).start()
        checks_extra = Checks()
        try:
            time.sleep(warmup)
            k1 = stack.keys[0]
            k2 = ("k2", new_key())
            rolls = []

            def roll(label: str):
                say(f"roll: {label}")
                took = stack.rolling_restart(signal.SIGTERM, pause=pause, on_step=lambda i, s: say(
                    f"  instance {i.index}: SIGTERM → exit {i.exits[-1][1]} → ready in {s:.2f} s"))
                rolls.append((label, took))

            stack.set_keys([k1, k2], current="k1")
            roll("1/3 add k2 (k1 still seals)")
            stack.set_keys([k1, k2], current="k2")
            roll("2/3 k2 seals")
            rotations = []
            for attempt in range(10):
                result = stack.tokengate("keys", "rotate")
                rotations.append((result.returncode, result.stdout.strip() or result.stderr.strip()))
                say(f"tokengate keys rotate → exit {result.returncode}: {rotations[-1][1]}")
                if result.returncode != 3:
                    break
                time.sleep(1)
            time.sleep(grace + 1)
            remaining = stack.psql("SELECT (SELECT count(*) FROM upstream_grants WHERE key_id <> 'k2')"
                                   " + (SELECT count(*) FROM upstream_access_tokens WHERE key_id <> 'k2')")[0][0]
            stack.set_keys([k2], current="k2")
            roll("3/3 k1 removed")
            time.sleep(warmup)
        finally:
            settle(load, stack)
        print_load(load, stack)
        checks = standard_checks(stack, load)
        for label, took in rolls:
            checks.add(f"roll {label}: seconds SIGTERM→ready per instance", " ".join(f"{t:.1f}" for t in took), bound=None)
        drains = drain_report(stack)
        checks.add("SIGTERM stops", len(drains), bound=9, exact=True)
        checks.add("drains without `shutting down` + `stopped` logged", sum(1 for d in drains if not (d[3] and d[4])))
        checks.add("drains with a non-zero exit code", sum(1 for d in drains if d[2] != 0))
        checks.add("requests in flight at each SIGTERM (from the `shutting down` lines)",
                   " ".join(str(d[5]) for d in drains), bound=None)
        final = rotations[-1] if rotations else (None, "")
        checks.add("keys rotate: last exit code", final[0], bound=0, exact=True, note=final[1])
        checks.add("rows still sealed under k1 before it was removed", int(remaining))
        return finish(checks, stack)


def slope_per_hour(points: list) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return 0.0
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx * 3600


def soak(minutes: float = 10, devices: int = 24, every: float = 10, warmup: float = 30, **stack_options) -> int:
    """Two instances behind nginx under a steady load for `minutes`; every `every` seconds the
    instances' RSS, descriptors and threads, PostgreSQL's connections and the tables' row counts
    are sampled, with latency percentiles per interval. After `warmup` seconds each series'
    least-squares slope per hour is checked against SOAK_BOUNDS, and each table that keeps rows
    on purpose against the operations that create them (RETAINED)."""
    seconds = minutes * 60
    with Stack(instances=2, **stack_options) as stack:
        stack.start()
        say(f"2 instances behind nginx at {stack.entry_url}; {devices} devices for {minutes:g} min, a sample every {every:g} s")
        load = Load(stack.entry_url, devices=devices, duration=seconds, history=stack.provider_history).start()
        samples = []  # dicts: t, the series, latency of the interval, errors and operations so far
        stop = threading.Event()

        def sampler():
            last = 0.0
            while not stop.is_set():
                t = load.elapsed()
                row = {"t": round(t, 1)}
                for instance in stack.instances:
                    status = instance.proc_status()
                    row[f"rss_mib[{instance.index}]"] = round(status.get("rss_kib", 0) / 1024, 2)
                    row[f"fds[{instance.index}]"] = status.get("fds", 0)
                    row[f"threads[{instance.index}]"] = status.get("threads", 0)
                try:
                    row["pg_connections"] = stack.connection_count()
                    for table, count in stack.table_counts().items():
                        row[f"rows.{table}"] = count
                except Exception as error:
                    row["sample_error"] = str(error)
                # The API's deliberately slow answers (api_slow) are left out: they would be the p99.
                row["latency"] = load.latencies(since=last, until=t, kinds=FAST_KINDS)
                row["errors"] = len(load.failures)
                row["ops"] = {name: load.total("ok", set(kinds)) for name, kinds in OPERATIONS.items()}
                last = t
                samples.append(row)
                stop.wait(every)

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        load.join(timeout=seconds + 120)
        stop.set()
        thread.join()
        settle(load, stack)
        print_load(load, stack)
        with open(os.path.join(stack.work, "samples.json"), "w") as f:
            json.dump(samples, f, indent=1)
        say("samples (latency of each interval's requests but api_slow, ms)")
        print(f"  {'t':>6} {'rss MiB':>15} {'fds':>9} {'pg':>4} {'sessions':>8} {'grants':>6} {'buckets':>7} "
              f"{'n':>5} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6} {'err':>4}")
        for row in samples:
            rss = "/".join(f"{row.get(f'rss_mib[{i.index}]', 0):.1f}" for i in stack.instances)
            fds = "/".join(str(row.get(f"fds[{i.index}]", 0)) for i in stack.instances)
            l = row["latency"]
            print(f"  {row['t']:>6} {rss:>15} {fds:>9} {row.get('pg_connections', '-'):>4} "
                  f"{row.get('rows.sessions', '-'):>8} {row.get('rows.upstream_grants', '-'):>6} "
                  f"{row.get('rows.rate_limit_buckets', '-'):>7} {l['count']:>5} {l['p50_ms']:>6} {l['p90_ms']:>6} "
                  f"{l['p99_ms']:>6} {l['max_ms']:>6} {row['errors']:>4}")
        checks = standard_checks(stack, load)
        steady = [r for r in samples if r["t"] >= warmup] or samples
        hours = (steady[-1]["t"] - steady[0]["t"]) / 3600 if len(steady) > 1 else 0
        series = sorted({k for r in steady for k in r if k not in ("t", "latency", "errors", "sample_error", "ops")})
        for name in series:
            points = [(r["t"], r[name]) for r in steady if name in r]
            first, last = points[0][1], points[-1][1]
            slope = round(slope_per_hour(points), 1)
            base = name.split("[")[0]
            if base in RETAINED:
                made = sum(steady[-1]["ops"][op] - steady[0]["ops"][op] for op in RETAINED[base])
                rise = last - first
                checks.add(f"{name}: rows added per {'+'.join(RETAINED[base])} ({first} → {last}, {made} ops)",
                           round(rise / made, 2) if made else 0.0, bound=1.0)
                continue
            bound, floor = SOAK_BOUNDS.get(base, SOAK_BOUNDS["rows.*"] if base.startswith("rows.") else (None, 0))
            if base == "pg_connections":
                # The pools open connections as the load asks, up to their ceiling: a short run's
                # pools may still be filling after the warm-up. A rise within the room left under
                # the ceiling is that; a leak passes the ceiling, which is checked on its own.
                ceiling = pg_connection_ceiling(stack)
                floor = max(floor, ceiling - first)
                checks.add("pg_connections at most, the ceiling: instances × (pool_size + 2) + the sampler",
                           max(p[1] for p in points), bound=ceiling)
            # A slope past its bound fails only when the fitted rise over the run also passes the
            # series' noise floor (pools and caches that fill and drain by a few).
            rise = slope * hours
            holds = bound is None or slope <= bound or rise <= floor
            note = "" if bound is None else f"fitted rise {rise:.1f}, noise floor {floor}"
            checks.add(f"slope/h {name} ({first} → {last})", slope, bound=bound, note=note, holds=holds)
        latencies = [r["latency"]["p99_ms"] for r in steady if r["latency"]["count"]]
        checks.add("p99 per interval but api_slow, worst (ms)", max(latencies) if latencies else 0, bound=None)
        checks.add("sample intervals", len(samples), bound=None)
        return finish(checks, stack)


def pg_connection_ceiling(stack: Stack) -> int:
    """What the instances may hold open to PostgreSQL (docs/scaling.md: each instance's pool
    and two more), and the sampler's own connection."""
    return len(stack.instances) * (stack.pool_size + 2) + 1


# The soak's bounds, per instance where the series is per instance: (slope per hour, noise floor
# of the fitted rise over the run). README.md in this folder says why these.
SOAK_BOUNDS = {
    "rss_mib": (8.0, 2.0),
    "fds": (10.0, 8),
    "threads": (2.0, 2),
    "pg_connections": (2.0, 2),
    "rows.*": (10.0, 24),
}
# Every kind of request but the API's deliberately slow answers.
FAST_KINDS = {"login", "authorize", "callback", "redeem", "me", "api", "api_forced", "api_post", "refresh", "transfer",
              "transfer_redeem", "logout", "after_logout", "after_transfer", "final_refresh"}
# Load outcomes (kind.ok) counted as operations, for the tables that keep rows on purpose.
OPERATIONS = {
    "logins": ["redeem"], "transfers": ["transfer_redeem"], "transfer_codes": ["transfer"],
    "refreshes": ["refresh", "final_refresh"], "logouts": ["logout"],
}
# Tables that grow with use by design until their rows expire (days): at most one row per
# operation that creates one. devices: one per login without a device secret and per transfer,
# kept for sessions.device_idle_ttl_seconds; transfer_codes: kept as long as the code lived, to
# recognise a second use; revoked_refresh_tokens: each rotated-away TokenGate refresh token
# (refreshes, transfers and logouts end or rotate sessions), kept for reuse detection.
RETAINED = {
    "rows.devices": ["logins", "transfers"],
    "rows.transfer_codes": ["transfer_codes"],
    "rows.revoked_refresh_tokens": ["refreshes", "transfers", "logouts"],
}


def main(argv: list) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="fleet", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["rolling", "soak", "smoke", "client"])
    parser.add_argument("amount", nargs="?", type=float, help="soak: minutes; smoke: seconds; client: seconds of each outage")
    parser.add_argument("--devices", type=int)
    parser.add_argument("--every", type=float, default=10, help="soak: seconds between samples")
    args = parser.parse_args(argv)
    if args.scenario == "rolling":
        return rolling(devices=args.devices or 24)
    if args.scenario == "client":
        from .provider_faults import client
        # An outage of 25 s still reaches the 16 s backoff window; the recovery is as long. Not
        # one as long as a sum of the windows (2, 6, 14, 30, 62 s): the provider's last refusal
        # would race its return, and a refusal just before it starts a window twice as long.
        return client(devices=args.devices or 24, outage=args.amount or 45, recovery=args.amount or 45)
    if args.scenario == "soak":
        return soak(minutes=args.amount or 10, devices=args.devices or 24, every=args.every)
    return smoke(seconds=args.amount or 30, devices=args.devices or 12)
