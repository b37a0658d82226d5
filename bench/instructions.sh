#!/usr/bin/env bash
# User-space instructions per request, by library, of TokenGate, of the C floor
# (bench/floor/proxy_floor.c) and of the wrappers' floor (tokengate-bench-server's /loop/: the
# same hop through TGHTTPServer and TGHTTPClient, doing what the C floor does), counted by valgrind's callgrind: within a few per cent from run to
# run (how the loop's wake-ups batch the work varies), where CPU time here drifts by more than 10 %
# (docs/performance.md). Kernel time is not in these counts (it is about the same for both: the
# same system calls per request).
#
#   bench/instructions.sh [SECONDS] [TOP]
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, an nginx upstream, a release `tokengate serve`
# under callgrind (with its instrumentation off until the load starts) and the floor under
# callgrind, logs in once, warms the cached path, then for SECONDS (default 10) drives each with
# `wrk -t1 -c4` (CONNECTIONS) on the cached proxied call (`GET /api/bench/hello`, the app's bearer token
# in both; the floor checks it and sends the fields TokenGate sends, bench/lib.sh), for TokenGate also with a DPoP-bound token (a fresh proof per
# call, bench/dpop.lua) and on `/healthz`. Prints instructions per request by library
# (`memset` apart: libmicrohttpd clears a connection's memory pool with `rep stosb`, which
# callgrind counts per byte), and TokenGate's TOP (default 25) functions of its own by
# instructions per request. Thread exits are left out (an idle worker thread's heap freed: time's
# cost, not a request's) and their share is printed. KEEP_DUMPS=DIR keeps callgrind's dumps. TOKENGATE_BINARY=/path/to/tokengate
# counts that build (an older one) instead of this tree's release build. CONNECTIONS and
# ONLY_CACHED: below. Runs 50 times slower than
# natively; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
seconds=${1:-10}
top=${2:-25}
# CONNECTIONS=1: one request at a time, so every request takes the same path through the loop's
# wake-ups (with 4, how they batch varies the count by up to 2k): for comparing two builds.
connections=${CONNECTIONS:-4}
EXTRA_PACKAGES="nginx wrk valgrind" scripts/deps.sh

# WRAPPERS_BINARY=/path/to/tokengate-bench-server: that build of the wrappers' floor instead.
wrappers_floor_binary
tokengate_binary
build_floor -lmimalloc

work=$(mktemp -d /tmp/tokengate-bench-instructions.XXXXXX)
chmod 755 "$work"
pids=()
trap 'stop_bench "$work" 25732' EXIT

NGINX_PORT=18480 UPSTREAM_PORT=18481 FLOOR_PORT=18483 WRAPPERS_PORT=18484 TG_PORT=18490 MOCK_PORT=18491

bench_api_stack "$work" 25732
# The bench app allows DPoP (tokengate-dpop below); proofs made before the run stay acceptable.
sed -i 's|redirect_uris: \["com.example.app:/cb"\] }|redirect_uris: ["com.example.app:/cb"], dpop: allowed }|' "$work/tokengate.yaml"
echo "dpop: { proof_max_age_seconds: 600 }" >>"$work/tokengate.yaml"
callgrind_binary "$work"

# under_callgrind NAME URL COMMAND...: starts COMMAND under callgrind (output WORK/NAME.cg) once
# URL answers; sets cg_pid.
under_callgrind() {
    local name=$1 url=$2
    shift 2
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/$name.cg" "$@" >"$work/$name.log" 2>&1 &
    cg_pid=$!
    pids+=($cg_pid)
    for _ in $(seq 300); do curl -sf -o /dev/null "$url" && return 0; sleep 0.5; done
    echo "bench: $name did not come up under callgrind" >&2
    exit 1
}

# count NAME PID URL [WRK OPTIONS...] [-- SCRIPT ARGUMENTS...]: instructions per request of PID
# while wrk loads URL.
count() {
    local name=$1 pid=$2 url=$3 requests options=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
    callgrind_control --zero "$pid" >/dev/null 2>&1
    callgrind_control --instr=on "$pid" >/dev/null 2>&1
    requests=$(wrk -t1 -c"$connections" -d"${seconds}s" "${options[@]}" "$url" "$@" | awk '/requests in/ { print $1 }')
    callgrind_control --instr=off "$pid" >/dev/null 2>&1
    callgrind_control --dump="$name" "$pid" >/dev/null 2>&1
    sleep 1
    local dump
    dump=$(ls -t "$work"/*.cg.* | head -n 1)
    # KEEP_DUMPS=DIR keeps each dump (for `callgrind_annotate --inclusive=yes` and the like).
    [ -z "${KEEP_DUMPS:-}" ] || { mkdir -p "$KEEP_DUMPS" && cp "$dump" "$KEEP_DUMPS/$name.callgrind"; }
    python3 - "$dump" "$requests" "$name" "$top" <<'PY'
import collections, re, subprocess, sys
path, requests, name, top = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', path], capture_output=True, text=True).stdout
libraries = collections.Counter()
own = []
for line in out.splitlines():
    m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?):(.*) \[(.*)\]$', line)
    if not m:
        continue
    count, function, library = int(m.group(1).replace(',', '')), m.group(3), m.group(4).split('/')[-1]
    if 'memset' in function:
        library = 'memset'
    libraries[library] += count
    if library in ('tokengate', 'tokengate-proxy-floor', 'tokengate-bench-server'):
        own.append((count, function))
# A thread's exit frees its allocator heap (`__nptl_deallocate_tsd`, nearly all of it mimalloc's):
# idle worker threads end with time, not with requests, so that is left out.
inclusive = subprocess.run(['callgrind_annotate', '--inclusive=yes', '--threshold=100', path], capture_output=True, text=True).stdout
exits = 0
for line in inclusive.splitlines():
    m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+.*:__nptl_deallocate_tsd \[', line)
    if m:
        exits = int(m.group(1).replace(',', ''))
        break
for library in list(libraries):
    if library.startswith('libmimalloc'):
        libraries[library] = max(0, libraries[library] - exits)
total = sum(libraries.values())
print(f'{name}: {requests} requests, {total / requests / 1000:.1f}k instructions per request, of which '
      + ', '.join(f'{library} {count / requests / 1000:.1f}k' for library, count in libraries.most_common(8) if count >= requests * 50)
      + (f' (thread exits left out: {exits / requests / 1000:.1f}k)' if exits else ''))
if name.startswith('tokengate') and top > 0:
    demangled = subprocess.run(['swift', 'demangle', '--simplified'], input='\n'.join(f for _, f in own[:top]), capture_output=True, text=True).stdout.splitlines()
    for (count, _), function in zip(own[:top], demangled):
        print(f'    {count / requests:8.0f}  {function[:110]}')
PY
}

under_callgrind tokengate "http://127.0.0.1:$TG_PORT/readyz" "$work/tokengate" serve --config "$work/tokengate.yaml"
tg_pid=$cg_pid
token=$(login_token $TG_PORT)
for _ in 1 2 3; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "http://127.0.0.1:$TG_PORT/api/bench/hello")
done
[ "$code" = 200 ] || { echo "bench: warm-up call answered $code" >&2; exit 1; }
# The wrappers' floor: the same hop through TGHTTPServer and TGHTTPClient as TokenGate's proxy
# sends it, doing what the C floor does (tokengate-bench-server's /loop/).
cp "$wrappers_binary" "$work/tokengate-bench-server"
strip --strip-debug "$work/tokengate-bench-server"
export $(floor_fields 127.0.0.1:$TG_PORT)
PROXY_FLOOR_APP_TOKEN=$token under_callgrind wrappers "http://127.0.0.1:$WRAPPERS_PORT/plain" "$work/tokengate-bench-server" $WRAPPERS_PORT 127.0.0.1:$UPSTREAM_PORT
wrappers_pid=$cg_pid
for _ in 1 2 3; do curl -s -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$WRAPPERS_PORT/loop/hello"; done
# ONLY_CACHED=1: TokenGate's and the wrappers' cached calls alone (with CONNECTIONS=1, to compare
# two builds).
if [ "${ONLY_CACHED:-}" = 1 ]; then
    echo "user-space instructions per request (callgrind), wrk -t1 -c$connections for ${seconds}s each"
    count tokengate-cached $tg_pid "http://127.0.0.1:$TG_PORT/api/bench/hello" -H "Authorization: Bearer $token"
    count wrappers-cached $wrappers_pid "http://127.0.0.1:$WRAPPERS_PORT/loop/hello" -H "Authorization: Bearer $token"
    exit 0
fi
# A second session, bound to a DPoP key, and proofs for its calls (callgrind serves a few thousand
# in SECONDS; each proof is sent once).
key="$work/dpop-key.pem"
dpop_url="http://127.0.0.1:$TG_PORT/api/bench/hello"
bound=$(python3 scripts/mock_login.py "http://127.0.0.1:$TG_PORT" bench-app com.example.app:/cb alice "$key" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')
python3 scripts/dpop_proof.py --many $((seconds * 2000)) "$key" GET "$dpop_url" "$bound" >"$work/proofs"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: DPoP $bound" -H "DPoP: $(python3 scripts/dpop_proof.py "$key" GET "$dpop_url" "$bound")" "$dpop_url")
[ "$code" = 200 ] || { echo "bench: DPoP warm-up call answered $code" >&2; exit 1; }
# The floor's /healthz answers TokenGate's body (as in bench/proxy.sh).
healthz_body=$(printf '{"status":"ok","version":"%s"}' "$(awk -F'"' '/tokenGateVersion =/ {print $2}' Sources/TGApp/Version.swift)")
PROXY_FLOOR_APP_TOKEN=$token PROXY_FLOOR_HEALTHZ_BODY=$healthz_body under_callgrind floor "http://127.0.0.1:$FLOOR_PORT/healthz" "$floor" $FLOOR_PORT "http://127.0.0.1:$UPSTREAM_PORT" 1
floor_pid=$cg_pid

echo "user-space instructions per request (callgrind), wrk -t1 -c$connections for ${seconds}s each"
count tokengate-cached $tg_pid "http://127.0.0.1:$TG_PORT/api/bench/hello" -H "Authorization: Bearer $token"
count tokengate-dpop $tg_pid "$dpop_url" -s bench/dpop.lua -- "$work/proofs" 1 "$bound" /api/bench/hello
count floor-cached $floor_pid "http://127.0.0.1:$FLOOR_PORT/hello" -H "Authorization: Bearer $token"
count wrappers-cached $wrappers_pid "http://127.0.0.1:$WRAPPERS_PORT/loop/hello" -H "Authorization: Bearer $token"
count tokengate-healthz $tg_pid "http://127.0.0.1:$TG_PORT/healthz"
count floor-healthz $floor_pid "http://127.0.0.1:$FLOOR_PORT/healthz"
