#!/usr/bin/env bash
# WebSocket through a real `tokengate serve` next to nginx `proxy_pass` (with Upgrade) to the same
# echo API: the time to open a connection, each message's round trip and the messages per second,
# as ratios to nginx's.
#
#   bench/websocket.sh [CONNECTIONS] [MESSAGES] [SIZE] [ROUNDS] [HELD]    (defaults: 100 200 256 3 1000)
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, the echo API bench/ws_upstream.py, a
# TokenGate with that API (`websocket: true`) and an nginx (one worker, the fields TokenGate
# sends: bench/lib.sh's PROXY_TO_BACKEND, plus Upgrade and Connection), logs in once, then
# ROUNDS rounds, each opening CONNECTIONS WebSockets at once and sending MESSAGES messages of
# SIZE bytes on each, one after the other, waiting for each echo (bench/ws_client.py): to the API
# directly, through nginx and through TokenGate, in turn. Pinned: nginx and TokenGate on
# SERVER_CPUS (default 1; TokenGate then runs one loop), the API and the client on LOAD_CPUS
# (default 0). Figures per target: the time to open (handshake written to 101 read; TokenGate's
# includes its token check and its connection to the API), the round trip's median and p99,
# messages per second, and the proxy's CPU time per message (its /proc stat), medians over the rounds, with TokenGate's ratios to nginx. A round that
# ran while builds ran (`swift-build`, `swift-frontend`) is marked. Then one more run each through
# nginx (its worker) and TokenGate under `strace -c -f`: system calls per message (one message
# each way, the echo), by call. Last, HELD quiet WebSockets held open through each proxy: its
# resident memory (VmRSS) while they are open, less before, per connection. TOKENGATE_BINARY=… measures
# that build instead of this tree's release build. A short check: bench/websocket.sh 10 20 64 1.
# Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
connections=${1:-100}
messages=${2:-200}
size=${3:-256}
rounds=${4:-3}
held=${5:-1000}
pin_server=${SERVER_CPUS-1} pin_load=${LOAD_CPUS-0}
[ "$(nproc)" -ge 2 ] || { pin_server="" pin_load=""; }
export SERVER_CPUS=$pin_server LOAD_CPUS=$pin_load
EXTRA_PACKAGES="nginx strace" scripts/deps.sh
tokengate_binary

work=$(mktemp -d /tmp/tokengate-bench-ws.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    stop_bench "$work" 25933
}
trap cleanup EXIT
NGINX_PORT=18780 UPSTREAM_PORT=18781 TG_PORT=18790 MOCK_PORT=18791

on_load_cpus() { ${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} "$@"; }

database_url=$(bench_database "$work" 25933)
on_load_cpus python3 bench/ws_upstream.py $UPSTREAM_PORT >"$work/upstream.log" 2>&1 &
pids+=($!)
start_provider "$work" $MOCK_PORT
bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT "connection_limit: $(( (connections > held ? connections : held) * 2 + 64)), max_connections_per_ip: 0" \
    "name: ws, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, websocket: true, timeout_seconds: 30"
start_tokengate "$work" $TG_PORT
# nginx's fields as TokenGate's, without the keep-alive ones (an upgrade needs its own connection).
cat >"$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://127.0.0.1:$UPSTREAM_PORT;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection upgrade;
            proxy_set_header Authorization "Bearer $UPSTREAM_TOKEN";
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Forwarded-Proto http;
            proxy_set_header X-Forwarded-Host \$http_host;
            proxy_set_header X-Request-ID \$request_id;
            proxy_read_timeout 60s;
        }
    }
}
NGINX
on_server_cpus nginx -p "$work" -c "$work/nginx.conf" -g "daemon on;"
token=$(login_token $TG_PORT)

contended() { if pgrep -f 'swift-build|swift-frontend' >/dev/null; then echo 1; else echo 0; fi; }
cpu() { if [ -n "$1" ]; then awk '{ print $14 + $15 }' "/proc/$1/stat"; else echo 0; fi; }
ticks=$(getconf CLK_TCK)
nginx_worker=$(pgrep -P "$(cat "$work/nginx.pid")" | head -1)
# round TARGET PORT PATH TOKEN [PID]: one run of the client; appends its line, whether the round
# was contended, and the CPU time PID (the proxy) spent per message in microseconds to WORK/TARGET.
round() {
    local target=$1 busy line before after
    busy=$(contended)
    before=$(cpu "${5:-}")
    line=$(on_load_cpus python3 bench/ws_client.py "$2" "$3" "$4" "$connections" "$messages" "$size")
    after=$(cpu "${5:-}")
    [ "$(contended)" = 0 ] || busy=1
    echo "$line $busy $(awk -v b="$before" -v a="$after" -v t="$ticks" -v n="$(echo "$line" | awk '{ print $5 }')" \
        'BEGIN { printf (a > b && n > 0) ? "%.1f" : "-", (a - b) / t * 1e6 / n }')" >>"$work/$target"
}
# Warm: the upstream token is fetched.
round warm $TG_PORT /api/ws/echo "$token"
round warm $NGINX_PORT /echo ""
: >"$work/direct" >"$work/nginx" >"$work/tokengate"
for _ in $(seq "$rounds"); do
    round direct $UPSTREAM_PORT /echo ""
    round nginx $NGINX_PORT /echo "" "$nginx_worker"
    round tokengate $TG_PORT /api/ws/echo "$token" "$tg_pid"
done

# syscalls NAME PID PORT PATH TOKEN: "NAME messages total/message name count/message ..." while one
# client run goes through PID under strace (which slows every call: the counts matter, not the time).
syscalls() {
    local name=$1 pid=$2 line
    strace -c -f -U name,calls,errors -S calls -o "$work/$name.strace" -p "$pid" 2>/dev/null &
    local tracer=$!
    sleep 0.5
    line=$(on_load_cpus python3 bench/ws_client.py "$3" "$4" "$5" "$connections" "$messages" "$size")
    kill -INT "$tracer"
    wait "$tracer" 2>/dev/null || true
    awk -v name="$name" -v n="$(echo "$line" | awk '{ print $5 }')" '
        $1 ~ /^[a-z_0-9]+$/ && $2 ~ /^[0-9]+$/ && $1 != "total" { calls[$1] = $2; order[++k] = $1; total += $2 }
        END {
            line = sprintf("%-10s %7d messages %6.2f/message:", name, n, total / n)
            for (i = 1; i <= k; i++) if (calls[order[i]] / n >= 0.005) line = line sprintf(" %s %.2f", order[i], calls[order[i]] / n)
            print line
        }' "$work/$name.strace"
}
syscall_lines=$(syscalls nginx "$nginx_worker" $NGINX_PORT /echo ""; syscalls tokengate "$tg_pid" $TG_PORT /api/ws/echo "$token")

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# held NAME PID PORT PATH TOKEN: "NAME KiB per connection (before KiB, held KiB)" with HELD open.
held() {
    local name=$1 pid=$2 before during fifo="$work/held.$1"
    before=$(rss "$pid")
    mkfifo "$fifo"
    on_load_cpus python3 bench/ws_client.py "$3" "$4" "$5" "$held" 0 0 4 >"$fifo" &
    local client=$!
    read -r _ opened <"$fifo" || opened=0
    sleep 1
    during=$(rss "$pid")
    wait "$client" 2>/dev/null || true
    rm -f "$fifo"
    awk -v n="$name" -v b="$before" -v d="$during" -v o="$opened" \
        'BEGIN { printf "%-10s %5d held: %6.1f KiB each (resident %d KiB before, %d KiB held)\n", n, o, (o > 0) ? (d - b) / o : 0, b, d }'
}
held_lines=$(held nginx "$nginx_worker" $NGINX_PORT /echo ""; held tokengate "$tg_pid" $TG_PORT /api/ws/echo "$token")

echo "WebSocket: $connections connections at once x $messages messages of $size bytes, each after the last one's echo; $rounds round(s); servers on cpu ${SERVER_CPUS:-any}, API and client on cpu ${LOAD_CPUS:-any}."
printf '%-10s %12s %12s %12s %14s %12s %9s %9s %10s\n' target open_p50_ms rtt_p50_ms rtt_p99_ms messages_per_s cpu_us_per_msg \
    messages failures contended
for target in direct nginx tokengate; do
    printf '%-10s %12s %12s %12s %14s %12s %9s %9s %10s\n' "$target" "$(col "$work/$target" 1)" "$(col "$work/$target" 2)" \
        "$(col "$work/$target" 3)" "$(col "$work/$target" 4)" "$(col "$work/$target" 8)" "$(awk '{ s += $5 } END { print s }' "$work/$target")" \
        "$(awk '{ s += $6 } END { print s }' "$work/$target")" "$(awk '{ s += $7 } END { print s "/" NR }' "$work/$target")"
done
ratio() { awk -v a="$(col "$work/tokengate" "$1")" -v b="$(col "$work/nginx" "$1")" 'BEGIN { printf (b > 0) ? "%.2f" : "-", a / b }'; }
echo "TokenGate / nginx: open p50 $(ratio 1)x; round trip p50 $(ratio 2)x, p99 $(ratio 3)x; messages per second $(ratio 4)x; CPU per message $(ratio 8)x"
echo "(the Python client and API on one core cap the messages per second of every target alike: the CPU the proxy spent per message, on its own core, is what tells the proxies apart)"
echo "system calls per message, both ways (strace -c -f, one run each; opening and closing included):"
echo "$syscall_lines"
echo "memory per quiet WebSocket held open ($held at once):"
echo "$held_lines"
failed=$(cat "$work/direct" "$work/nginx" "$work/tokengate" | awk '{ s += $6 } END { print s + 0 }')
if grep -qiE '"level":"(error|critical)"' "$work/tg.log"; then
    echo "TokenGate logged errors:"; grep -iE '"level":"(error|critical)"' "$work/tg.log" | tail -5
fi
[ "$failed" = 0 ]
