#!/usr/bin/env bash
# Server-sent events through a real `tokengate serve` next to nginx `proxy_pass` to the same API:
# the time to the first event and each event's delay, as ratios to nginx's.
#
#   bench/sse.sh [STREAMS] [EVENTS] [INTERVAL_MS] [ROUNDS]    (defaults: 100 50 50 3)
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, the API bench/sse_upstream.py (a stream of
# EVENTS events, one every INTERVAL_MS, each stamped with the clock when written), a TokenGate
# with that API and an nginx (one worker, `proxy_buffering off`, keep-alive to the API, the
# fields TokenGate sends: bench/lib.sh's PROXY_TO_BACKEND), logs in once, then ROUNDS rounds,
# each reading STREAMS streams at once (bench/sse_client.py) from the API directly, through nginx
# and through TokenGate, in turn. Pinned: nginx and TokenGate on SERVER_CPUS (default 1; TokenGate
# then runs one loop), the API and the reader on LOAD_CPUS (default 0). Figures per target: the
# time to the first event (request written to first event read: TokenGate's includes its token
# check and the API's connection) and the events' delays (written by the API to read by the
# app), median and p99, medians over the rounds, with TokenGate's ratios to nginx. A round that
# ran while other builds ran (`swift-build`, `swift-frontend`) is marked: its figures are noisy.
# TOKENGATE_BINARY=/path/to/tokengate measures that build instead of this tree's release build.
# A short check of the script: bench/sse.sh 10 5 20 1. Everything stops by itself; nothing leaves
# loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
streams=${1:-100}
events=${2:-50}
interval=${3:-50}
rounds=${4:-3}
pin_server=${SERVER_CPUS-1} pin_load=${LOAD_CPUS-0}
[ "$(nproc)" -ge 2 ] || { pin_server="" pin_load=""; }
export SERVER_CPUS=$pin_server LOAD_CPUS=$pin_load
EXTRA_PACKAGES="nginx" scripts/deps.sh
tokengate_binary

work=$(mktemp -d /tmp/tokengate-bench-sse.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    stop_bench "$work" 25932
}
trap cleanup EXIT
NGINX_PORT=18680 UPSTREAM_PORT=18681 TG_PORT=18690 MOCK_PORT=18691

on_load_cpus() { ${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} "$@"; }

database_url=$(bench_database "$work" 25932)
on_load_cpus python3 bench/sse_upstream.py $UPSTREAM_PORT >"$work/upstream.log" 2>&1 &
pids+=($!)
start_provider "$work" $MOCK_PORT
bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT "" \
    "name: sse, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, timeout_seconds: 30, max_connections: $((streams + 16))"
start_tokengate "$work" $TG_PORT
cat >"$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    upstream sse { server 127.0.0.1:$UPSTREAM_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / { proxy_pass http://sse; proxy_buffering off; proxy_read_timeout 30s; $PROXY_TO_BACKEND }
    }
}
NGINX
on_server_cpus nginx -p "$work" -c "$work/nginx.conf" -g "daemon on;"
token=$(login_token $TG_PORT)

contended() { if pgrep -f 'swift-build|swift-frontend' >/dev/null; then echo 1; else echo 0; fi; }
# round TARGET PORT PATH TOKEN: one read of every stream; appends the client's line and whether
# the round was contended to WORK/TARGET.
round() {
    local target=$1 busy line
    busy=$(contended)
    line=$(on_load_cpus python3 bench/sse_client.py "$2" "$3" "$4" "$streams" "$events" "$interval")
    [ "$(contended)" = 0 ] || busy=1
    echo "$line $busy" >>"$work/$target"
}
# Warm: the upstream token is fetched, and connections to the API are open.
round warm $TG_PORT /api/sse/events "$token"
round warm $NGINX_PORT /events ""
: >"$work/direct" >"$work/nginx" >"$work/tokengate"
for _ in $(seq "$rounds"); do
    round direct $UPSTREAM_PORT /events ""
    round nginx $NGINX_PORT /events ""
    round tokengate $TG_PORT /api/sse/events "$token"
done

echo "SSE: $streams streams at once x $events events, one every $interval ms; $rounds round(s); servers on cpu ${SERVER_CPUS:-any}, API and reader on cpu ${LOAD_CPUS:-any}."
printf '%-10s %12s %12s %12s %12s %12s %8s %9s %10s\n' target first_p50_ms first_p99_ms delay_p50_ms delay_p99_ms delay_max_ms events failures contended
for target in direct nginx tokengate; do
    printf '%-10s %12s %12s %12s %12s %12s %8s %9s %10s\n' "$target" "$(col "$work/$target" 1)" "$(col "$work/$target" 2)" \
        "$(col "$work/$target" 3)" "$(col "$work/$target" 4)" "$(col "$work/$target" 5)" "$(col "$work/$target" 6)" \
        "$(awk '{ s += $7 } END { print s }' "$work/$target")" "$(awk '{ s += $8 } END { print s "/" NR }' "$work/$target")"
done
ratio() { awk -v a="$(col "$work/tokengate" "$1")" -v b="$(col "$work/nginx" "$1")" 'BEGIN { printf (b > 0) ? "%.2f" : "-", a / b }'; }
echo "TokenGate / nginx: first event p50 $(ratio 1)x, p99 $(ratio 2)x; event delay p50 $(ratio 3)x, p99 $(ratio 4)x"
failed=$(cat "$work/direct" "$work/nginx" "$work/tokengate" | awk '{ s += $7 } END { print s + 0 }')
if grep -qiE '"level":"(error|critical)"' "$work/tg.log"; then
    echo "TokenGate logged errors:"; grep -iE '"level":"(error|critical)"' "$work/tg.log" | tail -5
fi
[ "$failed" = 0 ]
