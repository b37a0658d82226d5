#!/usr/bin/env bash
# The cached proxied GET next to nginx `proxy_pass`, the C floor (bench/floor/proxy_floor.c) and
# the wrappers' floor (tokengate-bench-server's /loop/: the same hop through TGHTTPServer and
# TGHTTPClient as TokenGate's proxy makes it, doing per call what the C floor does), pinned and
# unpinned, with TokenGate's access log off and on, and the system calls each makes per
# request: the whole table in one command.
#
#   bench/hop.sh [SECONDS] [ROUNDS] [CONNECTIONS]
#
# Starts a throwaway PostgreSQL, oidc-provider-mock and an upstream nginx of its own (the answer
# every target relays, so the reference's counts are its proxy's only), logs in once, then per
# placement:
#   pinned    servers on SERVER_CPUS (default 1: the reference nginx with one worker, the floor
#             with one loop, TokenGate with one loop as its affinity gives it), wrk -t1 on
#             LOAD_CPUS (default 0);
#   unpinned  the same started without affinity (nginx and the floor one worker or loop per core,
#             TokenGate its default), wrk -t2;
# ROUNDS (default 3) rounds of SECONDS (default 8) interleaved (nginx, floor, wrappers' floor,
# TokenGate with the access log off, TokenGate with it on, its default buffering), wrk -cCONNECTIONS (default 64) on
# GET /hello with TokenGate's fields (bench/lib.sh) and the app's bearer token (all three get the
# same `Authorization`); medians of req/s, p99 and CPU µs per request
# (user + system of the process over the round, divided by the requests wrk counted), the ratios to
# nginx and the floor, and the spread of the rounds. Then, pinned, the system calls per request of
# each (`strace -c -f` attached while wrk -t1 runs 4 s; strace slows every call, so the batching
# of events, epoll_wait per request, is not an untraced run's). A round started while other builds
# run (`swift-build`, `swift-frontend`) is counted and the table says so: req/s and CPU are then
# noisy, counts are not. STRACE_STACKS=1 also prints each target's distinct stacks of the calls
# other than epoll_wait and the plain reads and writes (`strace -k`). INSTRUCTIONS=1 ends with
# bench/instructions.sh (instructions per call, TokenGate against the floor, under callgrind).
# TOKENGATE_BINARY=/path/to/tokengate measures that build instead of this tree's release build.
# Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
duration=${1:-8}
rounds=${2:-3}
connections=${3:-64}
pin_server=${SERVER_CPUS-1} pin_load=${LOAD_CPUS-0}
[ "$(nproc)" -ge 2 ] || { pin_server="" pin_load=""; }
EXTRA_PACKAGES="nginx wrk strace" scripts/deps.sh
wrappers_floor_binary
tokengate_binary
build_floor -lmimalloc

work=$(mktemp -d /tmp/tokengate-bench-hop.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    stop_placement
    [ -f "$work/up/nginx.pid" ] && kill "$(cat "$work/up/nginx.pid")" 2>/dev/null || true
    stop_bench "$work" 25832
}
trap cleanup EXIT
NGINX_PORT=18580 UPSTREAM_PORT=18581 SPARE_PORT=18582 FLOOR_PORT=18583 WRAPPERS_PORT=18584 TG_PORT=18590 MOCK_PORT=18591 TG_LOG_PORT=18592

database_url=$(bench_database "$work" 25832)
mkdir -p "$work/up"
cat >"$work/up/nginx.conf" <<NGINX
worker_processes 1;
pid $work/up/nginx.pid;
error_log $work/up/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$UPSTREAM_PORT;
        location / { default_type application/json; return 200 '{"value":"hello, world!"}'; }
    }
}
NGINX
start_provider "$work" $MOCK_PORT
bench_secret=$(openssl rand -base64 32)
upstream="name: bench, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, max_connections: 64"
bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT "" "$upstream"
mkdir -p "$work/log"
bench_log="level: info, access_log: true" bench_configuration "$work/log/tokengate.yaml" $TG_LOG_PORT "$database_url" $MOCK_PORT "" "$upstream"
"$bindir/tokengate" migrate --config "$work/tokengate.yaml" >/dev/null

# start_placement: the upstream, the reference, the floor and both TokenGates, on SERVER_CPUS when
# set; sets nginx_worker, floor_pid, wrappers_pid, tg_pid, tg_log_pid.
start_placement() {
    local loops=1
    [ -n "${SERVER_CPUS:-}" ] || loops=$(nproc)
    on_server_cpus nginx -p "$work/up" -c "$work/up/nginx.conf" -g "daemon on;"
    reference_nginx "$work" $NGINX_PORT $SPARE_PORT "location / { proxy_pass http://backend; $PROXY_TO_BACKEND }"
    # One worker a loop, its upstream block the nginx above (its own second server unused).
    sed -i "s/^worker_processes auto;/worker_processes $loops;/; s/server 127.0.0.1:$SPARE_PORT; keepalive/server 127.0.0.1:$UPSTREAM_PORT; keepalive/" "$work/nginx.conf"
    nginx -p "$work" -c "$work/nginx.conf" -s reload 2>/dev/null
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} env $(floor_fields 127.0.0.1:$TG_PORT) "$floor" $FLOOR_PORT "http://127.0.0.1:$UPSTREAM_PORT" "$loops" >"$work/floor.log" 2>&1 &
    floor_pid=$!
    start_wrappers_floor "$work" $WRAPPERS_PORT
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$bindir/tokengate" serve --config "$work/tokengate.yaml" >"$work/tg.log" 2>&1 &
    tg_pid=$!
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$bindir/tokengate" serve --config "$work/log/tokengate.yaml" >"$work/log/tg.log" 2>&1 &
    tg_log_pid=$!
    placement_pids=("$floor_pid" "$wrappers_pid" "$tg_pid" "$tg_log_pid")
    wait_for "http://127.0.0.1:$TG_PORT/readyz"
    wait_for "http://127.0.0.1:$TG_LOG_PORT/readyz"
    wait_for "http://127.0.0.1:$FLOOR_PORT/healthz"
    sleep 1
    nginx_worker=$(pgrep -P "$(cat "$work/nginx.pid")" | head -n 1)
}
placement_pids=()
stop_placement() {
    for pid in "${placement_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${placement_pids[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; done
    placement_pids=()
    for file in "$work/nginx.pid" "$work/up/nginx.pid"; do
        if [ -f "$file" ]; then kill "$(cat "$file")" 2>/dev/null || true; fi
    done
    sleep 0.5
}

# contended: 1 while other builds run on the machine.
contended() { if pgrep -f 'swift-build|swift-frontend' >/dev/null; then echo 1; else echo 0; fi; }
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)
# measure FILE PID URL [WRK OPTIONS...]: one wrk round; appends "req/s p99_ms cpu_us/req contended"
# to FILE (PID "-": no CPU figure).
measure() {
    local file=$1 pid=$2 url=$3 before=0 after=0 rps p50 p99 err busy
    shift 3
    busy=$(contended)
    [ "$pid" = - ] || before=$(cpu "$pid")
    read -r rps p50 p99 err <<<"$(wrk_run "$url" "$@")"
    [ "$pid" = - ] || after=$(cpu "$pid")
    [ "$(contended)" = 0 ] || busy=1
    [ "$err" = none ] || echo "bench: $url: $err" >&2
    awk -v r="$rps" -v p="$(ms "$p99")" -v b="$before" -v a="$after" -v t="$ticks" -v d="$duration" -v c="$busy" -v pid="$pid" \
        'BEGIN { printf "%s %s %s %s\n", r, p, (pid == "-") ? "-" : sprintf("%.2f", (a - b) / t * 1e6 / (r * d)), c }' >>"$file"
}

# count NAME PID URL [WRK OPTIONS...]: "NAME requests total/req name count/req ..." (strace -c -f).
count() {
    local name=$1 pid=$2 url=$3 requests
    shift 3
    ${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} wrk -t1 -c"$connections" -d1s "$@" "$url" >/dev/null
    strace -c -f -U name,calls,errors -S calls -o "$work/$name.strace" -p "$pid" 2>/dev/null &
    local tracer=$!
    sleep 0.5
    requests=$(${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} wrk -t1 -c"$connections" -d4s "$@" "$url" | awk '/requests in/ { print $1 }')
    kill -INT "$tracer"
    wait "$tracer" 2>/dev/null || true
    awk -v name="$name" -v n="$requests" '
        $1 ~ /^[a-z_0-9]+$/ && $2 ~ /^[0-9]+$/ && $1 != "total" {
            calls[$1] = $2; errors[$1] = $3 + 0; order[++k] = $1; total += $2
            if ($1 != "epoll_wait") besides += $2 }
        END {
            line = sprintf("%-13s %7d req %6.2f/req, %5.2f besides epoll_wait:", name, n, total / n, besides / n)
            for (i = 1; i <= k; i++) {
                c = calls[order[i]] / n
                if (c < 0.005) continue
                line = line sprintf(" %s %.2f", order[i], c)
                if (errors[order[i]] / n >= 0.005) line = line sprintf(" (%.2f EAGAIN or failed)", errors[order[i]] / n)
            }
            print line
        }' "$work/$name.strace"
}

# stacks NAME PID URL [WRK OPTIONS...]: the distinct stacks of the calls other than epoll_wait and
# the plain reads and writes (strace -k, a second of load).
stacks() {
    local name=$1 pid=$2 url=$3
    shift 3
    strace -f -k -e trace=poll,ppoll,epoll_ctl,recvfrom,read,write,getsockopt,setsockopt,fcntl -o "$work/$name.stacks" -p "$pid" 2>/dev/null &
    local tracer=$!
    sleep 0.5
    ${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} wrk -t1 -c4 -d2s "$@" "$url" >/dev/null
    kill -INT "$tracer"
    wait "$tracer" 2>/dev/null || true
    echo "== $name: calls by stack (count, call, innermost frames first)"
    python3 - "$work/$name.stacks" <<'PY'
import collections, re, sys
stacks = collections.Counter()
call, frames = None, []
def flush():
    if call:
        stacks[(call, ' < '.join(frames[:9]))] += 1
for line in open(sys.argv[1]):
    if line.lstrip().startswith('>'):
        f = re.match(r'^\s*>\s*(\S+)\s*(?:\(([^)+]*))?', line)
        frames.append((f.group(2) or '?') + '@' + f.group(1).split('/')[-1])
        continue
    m = re.match(r'^(?:\[pid\s+\d+\]\s+|\d+\s+)?([a-z_0-9]+)\(', line)
    if m:
        flush()
        call, frames = m.group(1) + ('=EAGAIN' if 'EAGAIN' in line else ''), []
flush()
for (call, stack), n in stacks.most_common(16):
    print(f'{n:7d} {call:16s} {stack}')
PY
}

hello=(-H "Authorization: Bearer PLACEHOLDER")
token=""
# placement NAME: rounds of every target, then (pinned) the system calls.
placement() {
    local name=$1
    start_placement
    if [ -z "$token" ]; then
        token=$(login_token $TG_PORT)
    fi
    hello=(-H "Authorization: Bearer $token")
    for port in $TG_PORT $TG_LOG_PORT; do
        code=$(curl -s -o /dev/null -w '%{http_code}' "${hello[@]}" "http://127.0.0.1:$port/api/bench/hello")
        [ "$code" = 200 ] || { echo "bench: warm-up call on $port answered $code" >&2; exit 1; }
    done
    for target in nginx floor wrappers tg tglog; do : >"$work/$name.$target"; done
    for _ in $(seq "$rounds"); do
        measure "$work/$name.nginx" - "http://127.0.0.1:$NGINX_PORT/hello" "${hello[@]}"
        measure "$work/$name.floor" "$floor_pid" "http://127.0.0.1:$FLOOR_PORT/hello" "${hello[@]}"
        measure "$work/$name.wrappers" "$wrappers_pid" "http://127.0.0.1:$WRAPPERS_PORT/loop/hello" "${hello[@]}"
        measure "$work/$name.tg" "$tg_pid" "http://127.0.0.1:$TG_PORT/api/bench/hello" "${hello[@]}"
        measure "$work/$name.tglog" "$tg_log_pid" "http://127.0.0.1:$TG_LOG_PORT/api/bench/hello" "${hello[@]}"
    done
    if [ "$name" = pinned ]; then
        count nginx "$nginx_worker" "http://127.0.0.1:$NGINX_PORT/hello" "${hello[@]}" >"$work/counts"
        count floor "$floor_pid" "http://127.0.0.1:$FLOOR_PORT/hello" "${hello[@]}" >>"$work/counts"
        count wrappers "$wrappers_pid" "http://127.0.0.1:$WRAPPERS_PORT/loop/hello" "${hello[@]}" >>"$work/counts"
        count tokengate "$tg_pid" "http://127.0.0.1:$TG_PORT/api/bench/hello" "${hello[@]}" >>"$work/counts"
        count tokengate-log "$tg_log_pid" "http://127.0.0.1:$TG_LOG_PORT/api/bench/hello" "${hello[@]}" >>"$work/counts"
        if [ -n "${STRACE_STACKS:-}" ]; then
            stacks floor "$floor_pid" "http://127.0.0.1:$FLOOR_PORT/hello" "${hello[@]}" >"$work/stacks"
            stacks tokengate "$tg_pid" "http://127.0.0.1:$TG_PORT/api/bench/hello" "${hello[@]}" >>"$work/stacks"
        fi
    fi
    stop_placement
}

SERVER_CPUS=$pin_server LOAD_CPUS=$pin_load placement pinned
# wrk -t2 unpinned (wrk_run's default), -t1 pinned: one load thread on its one core.
SERVER_CPUS="" LOAD_CPUS="" placement unpinned

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0 || a == "-" || b == "-") print "-"; else printf "%.2f", a / b }'; }
field() { awk -v c="$2" '$c != "-" { print $c }' "$1" | median; }
busy_rounds() { awk '$4 == 1' "$@" | wc -l; }
echo
echo "cached proxied GET: medians of $rounds interleaved rounds of ${duration}s, wrk -c$connections (pinned: servers on cpu ${pin_server:-any}, wrk -t2 on cpu ${pin_load:-any}; unpinned: no affinity)."
printf '%-9s %-14s %9s %8s %10s %7s %7s %7s  %s\n' placement target req/s p99_ms cpu_us/req rps_x p99_x cpu_x "req/s spread"
for name in pinned unpinned; do
    n_rps=$(field "$work/$name.nginx" 1) n_p99=$(field "$work/$name.nginx" 2) f_cpu=$(field "$work/$name.floor" 3)
    for target in nginx floor wrappers tg tglog; do
        file="$work/$name.$target"
        rps=$(field "$file" 1) p99=$(field "$file" 2) cpu=$(awk '$3 != "-"' "$file" | wc -l)
        [ "$cpu" -gt 0 ] && cpu=$(field "$file" 3) || cpu=-
        label=$target
        [ "$target" = tg ] && label="tokengate"
        [ "$target" = tglog ] && label="tokengate+log"
        printf '%-9s %-14s %9.0f %8.3f %10s %7s %7s %7s  %s\n' "$name" "$label" "$rps" "$p99" "$cpu" \
            "$(ratio "$rps" "$n_rps")" "$(ratio "$p99" "$n_p99")" "$(ratio "$cpu" "$f_cpu")" "$(awk '{print $1}' "$file" | spread)"
    done
done
for name in pinned unpinned; do
    echo "access log on/off ($name): req/s $(ratio "$(field "$work/$name.tglog" 1)" "$(field "$work/$name.tg" 1)")x, CPU per request $(ratio "$(field "$work/$name.tglog" 3)" "$(field "$work/$name.tg" 3)")x"
done
busy=$(busy_rounds "$work"/pinned.* "$work"/unpinned.*)
total=$(cat "$work"/pinned.* "$work"/unpinned.* | wc -l)
if [ "$busy" -gt 0 ]; then
    echo "UNDER CONTENTION: $busy of $total wrk runs started or ended while other builds ran (swift-build/swift-frontend): req/s, p99 and CPU are noisy; system-call counts are not."
else
    echo "no other build ran during the $total wrk runs."
fi
echo
echo "system calls per cached proxied GET, pinned (strace -c -f while wrk -t1 -c$connections runs 4 s):"
cat "$work/counts"
[ -z "${STRACE_STACKS:-}" ] || cat "$work/stacks"
if [ -n "${INSTRUCTIONS:-}" ]; then
    echo
    bench/instructions.sh 10 0
fi
