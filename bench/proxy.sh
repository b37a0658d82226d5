#!/usr/bin/env bash
# The proxy hop of a real `tokengate serve` next to nginx, on loopback, in one run.
#
#   bench/proxy.sh [DURATION_SECONDS] [CONNECTIONS] [ROUNDS] [BURST]
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, nginx, the C floor (bench/floor/proxy_floor.c:
# TokenGate's one-loop design without its logic) and a release `tokengate serve`, logs
# in once through the provider (scripts/mock_login.py), then:
#   1. cached   GET /api/bench/hello through TokenGate (session and upstream token in memory) vs
#               nginx `proxy_pass` and vs the C floor, both sending the upstream the fields
#               TokenGate sends (a bearer token of the same length, X-Forwarded-For, -Proto, -Host,
#               X-Request-ID, echoed in the answer; bench/lib.sh), all three sent the app's bearer
#               token, all to the same nginx upstream; wrk -t2 -cCONNECTIONS, alternating ROUNDS times,
#               medians; ratios of req/s and p99 to nginx, and CPU time per request (user + system
#               of the process over the run, divided by the requests wrk counted) of TokenGate and
#               of the floor (nginx's would include its upstream, which serves all three).
#      healthz  GET /healthz through TokenGate vs nginx `return 200` with the same body and
#               Cache-Control (the bare-route reference) and vs the C floor's static /healthz (the
#               same answer from libmicrohttpd alone: the bare route's floor on this stack), same
#               wrk settings, alternating; CPU per request of TokenGate and of the floor.
#   2. burst    BURST (default 10000) requests at once through TokenGate to an upstream that answers
#               after 1 s (tokengate-bench-server /sleep), BURST_ROUNDS (3) times: successes, time,
#               TokenGate's thread count before and after, and its peak resident memory (VmHWM,
#               median and spread of the rounds); then the same bursts through
#               a fresh C floor with TokenGate's limits (14 KiB per connection, 9000 upstream
#               connections, compact read buffers past 256 calls in flight per loop), the memory
#               floor of the design.
# Pinned and unpinned side by side, with the access log on and off and the system calls of each
# per request: bench/hop.sh.
# Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
root=$(pwd)
duration=${1:-10}
connections=${2:-64}
rounds=${3:-3}
burst=${4:-10000}
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh
# 10k clients plus up to 9k upstream connections: the hard limit here is 20000 descriptors.
ulimit -n "$(ulimit -Hn)"

release_build tokengate tokengate-bench-server
# The floor allocates with what TokenGate's release build links (mimalloc, Package.swift), so the
# allocator is no part of the ratio; FLOOR_MALLOC=glibc builds it with glibc's instead.
floor_malloc=${FLOOR_MALLOC:-mimalloc}
floor_libs=()
[ "$floor_malloc" = glibc ] || floor_libs+=(-lmimalloc)
build_floor "${floor_libs[@]}"

work=$(mktemp -d /tmp/tokengate-bench-proxy.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    stop_bench "$work" 25432
}
trap cleanup EXIT

NGINX_PORT=18180 UPSTREAM_PORT=18181 SLOW_PORT=18182 FLOOR_PORT=18183 TG_PORT=18190 MOCK_PORT=18191

database_url=$(bench_database "$work" 25432)

# /healthz: nginx's `return 200` with TokenGate's answer (same body and Cache-Control), the bare-route
# reference.
healthz_body=$(printf '{"status":"ok","version":"%s"}' "$(awk -F'"' '/tokenGateVersion =/ {print $2}' Sources/TGApp/Version.swift)")
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT "location / { proxy_pass http://backend; $PROXY_TO_BACKEND } location = /healthz { default_type application/json; add_header Cache-Control no-store; add_header X-Request-ID \$request_id; return 200 '$healthz_body'; }"
# The floor runs one loop per core (FLOOR_LOOPS), as nginx runs one worker per core.
floor_loops=${FLOOR_LOOPS:-$(nproc)}
env $(floor_fields 127.0.0.1:$TG_PORT) PROXY_FLOOR_HEALTHZ_BODY=$healthz_body "$floor" $FLOOR_PORT "http://127.0.0.1:$UPSTREAM_PORT" "$floor_loops" >"$work/floor.log" 2>&1 &
floor_pid=$!
pids+=($floor_pid)
"$bindir/tokengate-bench-server" $SLOW_PORT >"$work/slow.log" 2>&1 &
pids+=($!)
start_provider "$work" $MOCK_PORT

bench_pool_size=10 bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT \
    "connection_limit: 30000, max_connections_per_ip: 0, request_timeout_seconds: 60" \
    "name: bench, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, max_connections: 64" \
    "name: slow, base_url: \"http://127.0.0.1:$SLOW_PORT\", provider: mock, max_connections: 9000, timeout_seconds: 50"
start_tokengate "$work" $TG_PORT
token=$(login_token $TG_PORT)
# Warm: the upstream token is fetched once (one refresh at the provider), then served from memory.
for upstream in bench slow; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "http://127.0.0.1:$TG_PORT/api/$upstream/hello")
    [ "$upstream" = slow ] || [ "$code" = 200 ] || { echo "bench: warm-up call answered $code" >&2; tail -5 "$work/tg.log" >&2; exit 1; }
done


: >"$work/t" && : >"$work/n" && : >"$work/f" && : >"$work/h" && : >"$work/hn" && : >"$work/hf"
errors=""
# cpu PID: user + system clock ticks the process has used so far.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)
# per_request_us PID COMMAND...: runs wrk (COMMAND) and prints "req/s p99_ms cpu_us_per_request errors".
per_request_us() {
    local pid=$1 before after rps p50 p99 err
    shift
    before=$(cpu "$pid")
    read -r rps p50 p99 err <<<"$("$@")"
    after=$(cpu "$pid")
    awk -v r="$rps" -v p="$(ms "$p99")" -v b="$before" -v a="$after" -v t="$ticks" -v d="$duration" -v e="$err" \
        'BEGIN { printf "%s %s %.2f %s\n", r, p, (a - b) / t * 1e6 / (r * d), e }'
}
for _ in $(seq "$rounds"); do
    read -r n_rps _ n_p99 _ <<<"$(wrk_run "http://127.0.0.1:$NGINX_PORT/hello" -H "Authorization: Bearer $token")"
    echo "$n_rps $(ms "$n_p99")" >>"$work/n"
    per_request_us "$floor_pid" wrk_run "http://127.0.0.1:$FLOOR_PORT/hello" -H "Authorization: Bearer $token" >>"$work/f"
    read -r t_rps t_p99 t_cpu t_err <<<"$(per_request_us "$tg_pid" wrk_run "http://127.0.0.1:$TG_PORT/api/bench/hello" -H "Authorization: Bearer $token")"
    echo "$t_rps $t_p99 $t_cpu" >>"$work/t"
    [ "$t_err" = none ] || errors="$t_err"
    read -r h_rps _ h_p99 _ <<<"$(wrk_run "http://127.0.0.1:$NGINX_PORT/healthz")"
    echo "$h_rps $(ms "$h_p99")" >>"$work/hn"
    per_request_us "$floor_pid" wrk_run "http://127.0.0.1:$FLOOR_PORT/healthz" >>"$work/hf"
    per_request_us "$tg_pid" wrk_run "http://127.0.0.1:$TG_PORT/healthz" >>"$work/h"
done
t_rps=$(col "$work/t" 1) t_p99=$(col "$work/t" 2) t_cpu=$(col "$work/t" 3) n_rps=$(col "$work/n" 1) n_p99=$(col "$work/n" 2)
f_rps=$(col "$work/f" 1) f_p99=$(col "$work/f" 2) f_cpu=$(col "$work/f" 3)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
echo "loops: tokengate one per core (server.threads; libmicrohttpd and a libcurl client per API on each); C floor $floor_loops (malloc: $floor_malloc; tokengate: mimalloc); nginx worker_processes auto ($(nproc) cores). Medians of $rounds rounds of ${duration}s, wrk -t2 -c$connections."
printf '%-8s %10s %8s %10s %8s %7s %7s  %s\n' target req/s p99_ms cpu_us/req rps_x p99_x cpu_x errors
printf '%-8s %10.0f %8.3f %10s %8s %7s %7s  %s\n' nginx "$n_rps" "$n_p99" - 1.00 1.00 - -
printf '%-8s %10.0f %8.3f %10.2f %8s %7s %7s  %s\n' floor "$f_rps" "$f_p99" "$f_cpu" "$(ratio "$f_rps" "$n_rps")" "$(ratio "$f_p99" "$n_p99")" 1.00 -
printf '%-8s %10.0f %8.3f %10.2f %8s %7s %7s  %s\n' cached "$t_rps" "$t_p99" "$t_cpu" "$(ratio "$t_rps" "$n_rps")" "$(ratio "$t_p99" "$n_p99")" \
    "$(ratio "$t_cpu" "$f_cpu")" "${errors:-none}"
hn_rps=$(col "$work/hn" 1) hn_p99=$(col "$work/hn" 2) h_rps=$(col "$work/h" 1) h_p99=$(col "$work/h" 2) h_cpu=$(col "$work/h" 3)
printf '%-8s %10.0f %8.3f %10s %8s %7s %7s  %s\n' nginx-200 "$hn_rps" "$hn_p99" - 1.00 1.00 - -
hf_rps=$(col "$work/hf" 1) hf_p99=$(col "$work/hf" 2) hf_cpu=$(col "$work/hf" 3)
printf '%-8s %10.0f %8.3f %10.2f %8s %7s %7s  %s\n' floor-200 "$hf_rps" "$hf_p99" "$hf_cpu" "$(ratio "$hf_rps" "$hn_rps")" "$(ratio "$hf_p99" "$hn_p99")" 1.00 -
printf '%-8s %10.0f %8.3f %10.2f %8s %7s %7s  %s\n' healthz "$h_rps" "$h_p99" "$h_cpu" "$(ratio "$h_rps" "$hn_rps")" "$(ratio "$h_p99" "$hn_p99")" "$(ratio "$h_cpu" "$hf_cpu")" \
    "$(awk '{print $4}' "$work/h" | sort -u | tr '\n' ' ')"
echo "spread (min-max of $rounds rounds): healthz req/s $(awk '{print $1}' "$work/h" | spread), floor-200 req/s $(awk '{print $1}' "$work/hf" | spread), nginx return 200 req/s $(awk '{print $1}' "$work/hn" | spread)"
echo "spread (min-max of $rounds rounds): tokengate req/s $(awk '{print $1}' "$work/t" | spread), floor req/s $(awk '{print $1}' "$work/f" | spread), nginx req/s $(awk '{print $1}' "$work/n" | spread)"

threads() { awk '/^Threads:/ {print $2}' "/proc/$tg_pid/status"; }
# bursts PID URL FILE: BURST_ROUNDS bursts through PID (VmHWM reset before each: writing 5 to
# clear_refs), one "ok=… errors=… seconds=… peak_mib" line each in FILE. A burst's peak depends on
# how many of its calls are in flight at once (a slower start lets the first ones finish first),
# so it varies from burst to burst: the median and the spread are reported.
burst_rounds=${BURST_ROUNDS:-3}
bursts() {
    local pid=$1 url=$2 file=$3
    : >"$file"
    for _ in $(seq "$burst_rounds"); do
        echo 5 >"/proc/$pid/clear_refs"
        local result
        result=$(python3 bench/burst.py "$url" "$burst" "$token")
        echo "$result $(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")" >>"$file"
    done
}
before=$(threads)
bursts "$tg_pid" "http://127.0.0.1:$TG_PORT/api/slow/sleep" "$work/burst"
after=$(threads)
peak=$(awk '{print $4}' "$work/burst" | median)
echo "burst    $burst requests at once to a 1 s upstream, $burst_rounds times: $(awk '{print $1, $2, $3}' "$work/burst" | tr '\n' ' ')threads_before=$before threads_after=$after peak_rss_mib median $peak (spread $(awk '{print $4}' "$work/burst" | spread))"
env $(floor_fields 127.0.0.1:$TG_PORT) "$floor" $((FLOOR_PORT + 10)) "http://127.0.0.1:$SLOW_PORT" "$floor_loops" $((9000 / floor_loops)) >"$work/floor-burst.log" 2>&1 &
burst_floor=$!
pids+=($burst_floor)
wait_for "http://127.0.0.1:$((FLOOR_PORT + 10))/healthz"
bursts "$burst_floor" "http://127.0.0.1:$((FLOOR_PORT + 10))/sleep" "$work/burst-floor"
peak_floor=$(awk '{print $4}' "$work/burst-floor" | median)
echo "burst    the same through the C floor: $(awk '{print $1, $2, $3}' "$work/burst-floor" | tr '\n' ' ')peak_rss_mib median $peak_floor (spread $(awk '{print $4}' "$work/burst-floor" | spread)); TokenGate's peak x floor: $(ratio "$peak" "$peak_floor")"
