#!/usr/bin/env bash
# TokenGate through PostgreSQL failovers: a Patroni cluster on loopback (scripts/patroni.sh: etcd,
# a primary and a streaming replica), two `tokengate serve` behind nginx on the multi-host URL
# (target_session_attrs=read-write), the fleet's fake provider and API, simulated devices
# (bench/fleet), and in turn a Patroni switchover, a SIGKILL of the primary's postmaster and the
# loss of the primary's node (SIGKILL of its Patroni and postmaster); then a table of invariants
# (bench/fleet/failover.py). Exits non-zero when one fails.
#
#   bench/failover.sh [--sync] [--runs N] [--devices N] [--faults switchover,kill-primary,kill-node]
#
# --sync: Patroni's synchronous_mode. A debug build is enough for this check of correctness:
# TOKENGATE_BINARY names the binary (default: `swift build`'s debug tokengate). Bounded in time
# (15 minutes a run), and on exit every process it started stops and its folder goes
# (FAILOVER_KEEP=1 keeps the folder: logs, configurations).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1
for ((i = 1; i <= $#; i++)); do [ "${!i}" = --runs ] && { j=$((i + 1)); runs=${!j}; }; done

if [ -z "${TOKENGATE_BINARY:-}" ]; then
    echo "failover: debug build (swift build --product tokengate)" >&2
    swift build --product tokengate >/dev/null
    export TOKENGATE_BINARY=$(swift build --show-bin-path)/tokengate
fi
# Patroni and etcd are needed here only (scripts/patroni.sh installs them when missing).
scripts/patroni.sh install -

work=$(mktemp -d /tmp/tokengate-failover.XXXXXX)
chmod 755 "$work"
export FLEET_WORK=$work
[ "${FAILOVER_KEEP:-}" = 1 ] && export FLEET_KEEP=1
# The harness stops what it started; this is the net under it if it is killed: the fleet's
# recorded processes that still run one of its programs, every Patroni cluster, the folder.
cleanup() {
    trap - EXIT INT TERM
    local pid left=() dir
    for pids in "$work"/stack-*/pids; do
        [ -f "$pids" ] || continue
        while read -r pid; do
            grep -qaE 'tokengate|nginx|fleet' "/proc/$pid/cmdline" 2>/dev/null && left+=("$pid")
        done <"$pids"
    done
    if [ ${#left[@]} -gt 0 ]; then
        kill -TERM "${left[@]}" 2>/dev/null || true
        sleep 2
        kill -KILL "${left[@]}" 2>/dev/null || true
    fi
    for dir in "$work"/patroni-*; do [ -d "$dir" ] && scripts/patroni.sh stop "$dir" >/dev/null 2>&1 || true; done
    if [ "${FAILOVER_KEEP:-}" = 1 ]; then echo "failover: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$(date +%s)
status=0
PYTHONPATH=bench/fleet timeout --kill-after=30 $((900 * runs)) python3 -u -m failover "$@" || status=$?
echo "failover: finished in $(($(date +%s) - started)) s (exit $status)" >&2
exit "$status"
