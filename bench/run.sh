#!/usr/bin/env bash
# Throughput of TokenGate's HTTP layer next to nginx, on loopback, in one run.
#
#   bench/run.sh [DURATION_SECONDS] [CONNECTIONS] [ROUNDS]
#
# Builds release, starts nginx (Debian package) and tokengate-bench-server on 127.0.0.1, drives each
# with wrk (-t2), alternating TokenGate and nginx ROUNDS times per case (default 3), and prints the
# median requests/s, p50 and p99 per case and the ratios to its nginx reference:
#   plain      sync handler, no I/O           vs nginx `return 200` with the same 13-byte body
#   async      async handler, finishes inline  vs nginx `return 200`
#   async-hop  async handler via an idle actor  vs nginx `return 200` (runs inline: no suspension)
#   async-yield async handler that yields once  vs nginx `return 200` (suspend -> pool thread -> resume)
#   async-io   async handler whose work another thread completes, as libpq's or libcurl's does
#              (suspend -> I/O thread -> pool thread -> resume)   vs nginx `return 200`
#   proxy      one-hop proxy to an upstream    vs nginx `proxy_pass` to the same upstream
# Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
duration=${1:-10}
connections=${2:-64}
rounds=${3:-3}
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh

release_build tokengate-bench-server
bin=$bindir/tokengate-bench-server

work=$(mktemp -d /tmp/tokengate-bench.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    sleep 0.3
    rm -rf "$work"
}
trap cleanup EXIT

NGINX_PORT=18080 UPSTREAM_PORT=18081 TG_PORT=18090
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT \
    "location = /plain { default_type text/plain; return 200 \"hello, world!\"; } location /proxy/ { proxy_pass http://backend/; $PROXY_STATIC_TOKEN }"
"$bin" $TG_PORT "127.0.0.1:$UPSTREAM_PORT" >"$work/tg.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$TG_PORT/plain" >/dev/null && break; sleep 0.1; done



printf '%-12s %10s %8s %8s %11s %8s %8s %7s %7s  %s\n' case tg_req/s p50_ms p99_ms nginx_req/s p50_ms p99_ms rps_x p99_x errors
for case in plain async async-hop async-yield async-io proxy; do
    case $case in
        proxy) ref="http://127.0.0.1:$NGINX_PORT/proxy/me"; tg="http://127.0.0.1:$TG_PORT/proxy/me" ;;
        *) ref="http://127.0.0.1:$NGINX_PORT/plain"; tg="http://127.0.0.1:$TG_PORT/$case" ;;
    esac
    : >"$work/t" && : >"$work/n"
    errors=""
    for _ in $(seq "$rounds"); do
        read -r n_rps n_p50 n_p99 _ <<<"$(wrk_run "$ref")"
        echo "$n_rps $(ms "$n_p50") $(ms "$n_p99")" >>"$work/n"
        read -r t_rps t_p50 t_p99 t_err <<<"$(wrk_run "$tg")"
        echo "$t_rps $(ms "$t_p50") $(ms "$t_p99")" >>"$work/t"
        [ "$t_err" = none ] || errors="$t_err"
    done
    t_rps=$(col "$work/t" 1) t_p50=$(col "$work/t" 2) t_p99=$(col "$work/t" 3)
    n_rps=$(col "$work/n" 1) n_p50=$(col "$work/n" 2) n_p99=$(col "$work/n" 3)
    printf '%-12s %10.0f %8.3f %8.3f %11.0f %8.3f %8.3f %7.2f %7.2f  %s\n' "$case" "$t_rps" "$t_p50" "$t_p99" \
        "$n_rps" "$n_p50" "$n_p99" \
        "$(awk -v a="$t_rps" -v b="$n_rps" 'BEGIN{print a/b}')" \
        "$(awk -v a="$t_p99" -v b="$n_p99" 'BEGIN{print a/b}')" "${errors:-none}"
done
