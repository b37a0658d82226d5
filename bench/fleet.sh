#!/usr/bin/env bash
# TokenGate as ops run it: N instances on one PostgreSQL behind nginx, simulated devices, faults,
# and a table of invariants (bench/fleet/README.md). Everything on loopback, bounded in time,
# stopped and removed on exit.
#
#   bench/fleet.sh rolling              rolling restarts (SIGTERM) and a key rotation under load (~2 min)
#   bench/fleet.sh soak [MINUTES]       steady load on 2 instances, sampled; fails on a slope past its bound (10)
#   bench/fleet.sh smoke [SECONDS]      the load on 3 instances without a fault (30)
#   bench/fleet.sh client [SECONDS]     the provider refuses TokenGate's client twice for SECONDS each (45),
#                                       then takes it for as long again (~4 min; CI: 30, ~3 min)
#
# Builds TokenGate as bench/lib.sh does (release, Swift's runtime linked statically) unless
# TOKENGATE_BINARY names one. FLEET_DEVICES sets the number of devices (rolling, soak: 24;
# smoke: 12); FLEET_KEEP=1 keeps the work folder (logs, configurations) and prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

scenario=${1:?usage: bench/fleet.sh rolling | soak [MINUTES] | smoke [SECONDS] | client [SECONDS]}
amount=${2:-}
case "$scenario" in
rolling) limit=900 ;;
client) limit=900 ;;
soak) limit=$(awk -v m="${amount:-10}" 'BEGIN { print int(m * 60) + 600 }') ;;
smoke) limit=$(awk -v s="${amount:-30}" 'BEGIN { print int(s) + 300 }') ;;
*) echo "usage: bench/fleet.sh rolling | soak [MINUTES] | smoke [SECONDS] | client [SECONDS]" >&2; exit 2 ;;
esac

if [ -z "${TOKENGATE_BINARY:-}" ]; then
    echo "fleet: release build (swift build ${RELEASE_FLAGS[*]} --product tokengate)" >&2
    release_build tokengate
    export TOKENGATE_BINARY=$bindir/tokengate
fi

work=$(mktemp -d /tmp/tokengate-fleet.XXXXXX)
chmod 755 "$work"
export FLEET_WORK=$work
# The harness stops what it started itself; this is the net under it if it is killed: every
# process it recorded in $work/pids that still runs a program of the fleet, then PostgreSQL.
cleanup() {
    trap - EXIT INT TERM
    local pid left=()
    if [ -f "$work/pids" ]; then
        while read -r pid; do
            grep -qaE 'tokengate|nginx|fleet' "/proc/$pid/cmdline" 2>/dev/null && left+=("$pid")
        done <"$work/pids"
    fi
    if [ ${#left[@]} -gt 0 ]; then
        kill -TERM "${left[@]}" 2>/dev/null || true
        sleep 2
        kill -KILL "${left[@]}" 2>/dev/null || true
    fi
    scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true
    if [ "${FLEET_KEEP:-}" = 1 ]; then echo "fleet: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

args=("$scenario")
[ -n "$amount" ] && args+=("$amount")
[ -n "${FLEET_DEVICES:-}" ] && args+=(--devices "$FLEET_DEVICES")
started=$(date +%s)
status=0
PYTHONPATH=bench/fleet timeout --kill-after=20 "$limit" python3 -u -m fleet "${args[@]}" || status=$?
echo "fleet: $scenario finished in $(($(date +%s) - started)) s (exit $status)" >&2
exit "$status"
