#!/usr/bin/env bash
# What the upstream token's length costs a proxied call: the C floor (bench/floor/proxy_floor.c,
# libmicrohttpd and libcurl doing what TokenGate's hop does) and nginx `proxy_pass`, each sending
# the benches' 42-character bearer token and one of LONG bytes (default 2000: an Entra ID or
# Okta access token is a JWT of 1–3 KB), round by round.
#
#   bench/token-length.sh [ROUNDS] [SECONDS] [LONG]
#
# Every other bench sends a 42-character token, the mock provider's; a production token is
# fifty times longer, and libcurl builds each request head through its printf, which hands every
# byte of every field to a callback one at a time (`Curl_add_custom_headers`: "%s\r\n"; the same
# in libcurl's current source), where nginx copies the field whole. TokenGate's hop is the
# floor's libcurl calls, so the floor's difference is TokenGate's (a TokenGate run would need a
# provider that issues long tokens; the mock's are 42 characters).
# Pinned as bench/hop.sh pins: the four servers and the upstream on SERVER_CPUS (default 1), wrk
# -t1 -c64 on LOAD_CPUS (default 0), each target for SECONDS (default 3) in turn, ROUNDS (default
# 6) rounds. Per round and target: req/s and CPU µs per request (the process's user + system
# time); then medians, long ÷ short for each, and each floor ÷ nginx with the same token.
# Nothing leaves loopback; everything stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-6}
seconds=${2:-3}
long_bytes=${3:-2000}
export SERVER_CPUS=${SERVER_CPUS-1}
load_cpus=${LOAD_CPUS-0}
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh
floor=$(mktemp /tmp/tokengate-bench-floor.XXXXXX)
build_floor -lmimalloc

work=$(mktemp -d /tmp/tokengate-bench-token.XXXXXX)
chmod 755 "$work"
pids=()
trap 'rm -f "$floor"; stop_bench "$work" 0' EXIT
NGINX_PORT=19080 UPSTREAM_PORT=19081 NGINX_LONG_PORT=19082 FLOOR_PORT=19083 FLOOR_LONG_PORT=19084

# A JWT-shaped token: base64url characters, as long as asked.
long_token=$(python3 -c "import sys; print(('eyJ' + 'x' * int(sys.argv[1]))[:int(sys.argv[1])])" "$long_bytes")
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT "location / { proxy_pass http://backend; $PROXY_TO_BACKEND } }
    server {
        listen 127.0.0.1:$NGINX_LONG_PORT;
        location / { proxy_pass http://backend; ${PROXY_TO_BACKEND//$UPSTREAM_TOKEN/$long_token} }"
for token_port in "$UPSTREAM_TOKEN:$FLOOR_PORT" "$long_token:$FLOOR_LONG_PORT"; do
    # Not through on_server_cpus (a function: in the background its subshell's pid would be $!).
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} env PROXY_FLOOR_TOKEN="${token_port%:*}" PROXY_FLOOR_PUBLIC_HOST=127.0.0.1:$FLOOR_PORT \
        "$floor" "${token_port##*:}" "http://127.0.0.1:$UPSTREAM_PORT" 1 >"$work/floor.${token_port##*:}.log" 2>&1 &
    pids+=($!)
done
floor_pids=("${pids[@]}")
wait_for "http://127.0.0.1:$FLOOR_PORT/healthz"
wait_for "http://127.0.0.1:$FLOOR_LONG_PORT/healthz"
nginx_workers=$(pgrep -P "$(cat "$work/nginx.pid")" | head -n 1)

names=(nginx nginx-long floor floor-long)
ports=($NGINX_PORT $NGINX_LONG_PORT $FLOOR_PORT $FLOOR_LONG_PORT)
# nginx's one worker serves both of its servers and the upstream: its CPU is the hop's and the
# upstream's together, so nginx's figure is req/s only.
target_pids=("$nginx_workers" "$nginx_workers" "${floor_pids[0]}" "${floor_pids[1]}")
for port in "${ports[@]}"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer app" "http://127.0.0.1:$port/hello")
    [ "$code" = 200 ] || { echo "bench: warm-up call to port $port answered $code" >&2; exit 1; }
done
ticks=$(getconf CLK_TCK)
: >"$work/rounds"
for round in $(seq "$rounds"); do
    line=""
    for index in 0 1 2 3; do
        before=$(awk '{ print $14 + $15 }' "/proc/${target_pids[$index]}/stat")
        requests=$(taskset -c "$load_cpus" wrk -t1 -c64 -d"${seconds}s" -H "Authorization: Bearer app" \
            "http://127.0.0.1:${ports[$index]}/hello" | awk '/requests in/ { print $1 }')
        after=$(awk '{ print $14 + $15 }' "/proc/${target_pids[$index]}/stat")
        line+=" $(awk -v a="$after" -v b="$before" -v t="$ticks" -v n="$requests" -v s="$seconds" \
            'BEGIN { printf "%.0f %.2f", n / s, (a - b) / t * 1e6 / n }')"
    done
    echo "$line" >>"$work/rounds"
    echo "round $round (req/s, CPU µs per request):$(awk '{ printf " nginx %d, nginx-long %d, floor %d %.1f, floor-long %d %.1f", $1, $3, $5, $6, $7, $8 }' <<<"$line")"
done
python3 - "$work/rounds" "$long_bytes" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
med = lambda column: statistics.median(r[column] for r in rows)
def ratio(a, b):
    values = [r[a] / r[b] for r in rows]
    return f'{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})'
print(f'{len(rows)} rounds, medians: req/s nginx {med(0):.0f} / {med(2):.0f} with the {sys.argv[2]}-byte token, '
      f'floor {med(4):.0f} / {med(6):.0f}; floor CPU per request {med(5):.1f} / {med(7):.1f} µs')
print(f'long token ÷ short, per round, median (spread): nginx req/s {ratio(2, 0)}, floor req/s {ratio(6, 4)}, '
      f'floor CPU per request {ratio(7, 5)}')
print(f'floor ÷ nginx req/s, same token: short {ratio(4, 0)}, long {ratio(6, 2)}')
PY
