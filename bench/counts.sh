#!/usr/bin/env bash
# Per-request counts that do not drift with the machine's speed: `malloc` (mimalloc's, which the
# release build links; glibc's if it is not loaded), Swift objects allocated (`swift_allocObject`),
# `swift_retain` and `swift_release`, for a cached proxied call (`GET /api/bench/hello`) and for
# `/healthz`, taken with uprobes (perf) on a real release
# `tokengate serve`. Timing on this machine drifts by more than 10 % between runs; these counts
# move only when the code does, so they show a change that time cannot (docs/performance.md).
#
#   bench/counts.sh [SECONDS]
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, an nginx upstream and TokenGate, logs in
# once, then runs wrk -t1 -c4 for SECONDS (default 4) against each path while `perf stat` counts
# the probes in TokenGate's process, and divides by the requests wrk counted. Needs root (uprobes);
# the probes it adds are removed at the end. Nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
seconds=${1:-4}
EXTRA_PACKAGES="nginx wrk linux-perf" scripts/deps.sh

release_build tokengate

work=$(mktemp -d /tmp/tokengate-bench-counts.XXXXXX)
chmod 755 "$work"
pids=()
probes=()
cleanup() {
    for probe in "${probes[@]}"; do perf probe -q -d "$probe" 2>/dev/null || true; done
    stop_bench "$work" 25632
}
trap cleanup EXIT

NGINX_PORT=18380 UPSTREAM_PORT=18381 TG_PORT=18390 MOCK_PORT=18391

bench_api_stack "$work" 25632
start_tokengate "$work" $TG_PORT
token=$(login_token $TG_PORT)
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "http://127.0.0.1:$TG_PORT/api/bench/hello")
[ "$code" = 200 ] || { echo "bench: warm-up call answered $code" >&2; exit 1; }

# The libraries TokenGate loaded, and a probe on each counted function (named after it).
library() { awk -v name="$1" '$6 ~ name { print $6; exit }' "/proc/$tg_pid/maps"; }
# The allocator the release build links (mimalloc, Package.swift) if loaded, else glibc's.
allocator=$(library '/libmimalloc\.so')
[ -n "$allocator" ] || allocator=$(library '/libc\.so')
# Swift's runtime: in the binary itself (release builds link it statically), else its library.
swift_core=$(library '/libswiftCore\.so')
[ -n "$swift_core" ] || swift_core=$bindir/tokengate
events=()
add_probe() {
    local binary=$1 function=$2 event
    event="tokengate_counts:$function"
    perf probe -q -d "$event" 2>/dev/null || true
    # -f: another probe may already sit on the same address.
    # A runtime linked into the binary has local symbols without debug information there: probed
    # by address (nm) when probing by name fails.
    perf probe -q -f -x "$binary" -a "$event=$function" >/dev/null 2>&1 \
        || perf probe -q -f -x "$binary" -a "$event=0x$(nm "$binary" | awk -v f="$function" '$3 == f { print $1; exit }')" >/dev/null
    probes+=("$event")
    events+=(-e "$event")
}
add_probe "$allocator" malloc
for function in swift_allocObject swift_retain swift_release; do add_probe "$swift_core" "$function"; done

count() {
    local name=$1 url=$2 requests
    shift 2
    wrk -t1 -c4 -d1s "$@" "$url" >/dev/null
    perf stat -x, "${events[@]}" -p "$tg_pid" -o "$work/stat" -- sleep $((seconds + 1)) &
    local stat=$!
    sleep 0.3
    requests=$(wrk -t1 -c4 -d"${seconds}s" "$@" "$url" | awk '/requests in/ { print $1 }')
    while kill -0 "$stat" 2>/dev/null; do sleep 0.2; done
    awk -F, -v name="$name" -v n="$requests" '$3 ~ /tokengate_counts:/ {
        split($3, parts, ":"); counts = counts sprintf("  %s %.1f", parts[2], $1 / n) }
        END { printf "%-8s %8d requests %s\n", name, n, counts }' "$work/stat"
}
echo "per request, wrk -t1 -c4 for ${seconds}s"
count cached "http://127.0.0.1:$TG_PORT/api/bench/hello" -H "Authorization: Bearer $token"
count healthz "http://127.0.0.1:$TG_PORT/healthz"
