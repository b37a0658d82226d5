#!/usr/bin/env bash
# What the shared rate limits (docs/scaling.md, "Rate limits") cost a request: POST /auth/token
# answered 400 before any other database work, the cheapest rate-limited request there is, so the
# limiter's share is as large as it gets. In one run, alternating per round:
#   nginx      `return 400` with a JSON body: the reference for a request that does nothing
#   unlimited  TokenGate with token_rate_limit_per_minute: 0 (no limiter)
#   memory     TokenGate with the limit in its own memory (rate_limit_store: memory)
#   shared     TokenGate with the limit in PostgreSQL (the default), from one client address:
#              leases, so a take every 30 requests at most
#   shared-new TokenGate with the limit in PostgreSQL, every request from an address never seen:
#              the worst case, a take per request (the takes of concurrent requests share a
#              statement)
#   shared-1k  the same from 1 000 addresses in turn
# The shared instances' limit is 600 000 a minute so nothing is refused (refusals come from
# memory: cheaper still). Client addresses are X-Forwarded-For values from the loopback peer,
# a trusted proxy here; nothing leaves loopback.
#
#   bench/ratelimit.sh [DURATION_SECONDS] [CONNECTIONS] [ROUNDS] [ROUTE]
#
# ROUTE `login` measures GET /auth/login instead (a pending login stored, 302 to the provider): a
# limited request that does its own database work, as real ones do.
#
# Prints medians of req/s, p99 and CPU per request (TokenGate's, and PostgreSQL's), the takes and
# the statements the limiter ran per request, and the ratios to the unlimited path and to nginx.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
duration=${1:-10}
connections=${2:-64}
rounds=${3:-3}
route=${4:-token}
case $route in
    token) limit=token_rate_limit_per_minute path=/auth/token expected=400 method=POST ;;
    login) limit=login_rate_limit_per_minute path="/auth/login?client_id=bench-app&redirect_uri=com.example.app%3A%2Fcb&response_type=code&state=s&code_challenge_method=S256&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" expected=302 method=GET ;;
    *) echo "bench: ROUTE is token or login" >&2; exit 2 ;;
esac
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh
release_build tokengate

work=$(mktemp -d /tmp/tokengate-bench-ratelimit.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() { stop_bench "$work" 25542; }
trap cleanup EXIT
NGINX_PORT=18380 UPSTREAM_PORT=18381 MOCK_PORT=18391
UNLIMITED_PORT=18392 MEMORY_PORT=18393 SHARED_PORT=18394 SHARED_ADMIN_PORT=18395

database_url=$(bench_database "$work" 25542)
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT \
    "location / { default_type application/json; return 400 '{\"error\":\"invalid_request\",\"error_description\":\"grant_type is required.\"}'; }"
start_provider "$work" $MOCK_PORT
bench_secret=$(openssl rand -base64 32)
declare -A tg_pids
for variant in unlimited memory shared; do
    port_var="${variant^^}_PORT"
    port=${!port_var}
    case $variant in
        unlimited) options="trusted_proxies: [127.0.0.1/32]" ;;
        memory) options="trusted_proxies: [127.0.0.1/32], $limit: 600000, rate_limit_store: memory" ;;
        shared) options="trusted_proxies: [127.0.0.1/32], $limit: 600000" ;;
    esac
    mkdir -p "$work/$variant"
    bench_configuration "$work/$variant/tokengate.yaml" "$port" "$database_url" $MOCK_PORT "$options"
    # bench_configuration sets the limit to 0; a variant with its own drops that key.
    if [ "$variant" != unlimited ]; then sed -i "s/$limit: 0, //" "$work/$variant/tokengate.yaml"; fi
    # The shared instance's admin listener serves /metrics (the limiter's takes and statements).
    TOKENGATE_ADMIN_PORT=$([ "$variant" = shared ] && echo $SHARED_ADMIN_PORT || echo 0) start_tokengate "$work/$variant" "$port"
    tg_pids[$variant]=$tg_pid
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X "$method" "http://127.0.0.1:$SHARED_PORT$path")
[ "$code" = "$expected" ] || { echo "bench: $method $path answered $code" >&2; exit 1; }

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# PostgreSQL's CPU: the postmaster's, its live backends' and what its exited children used.
pg_cpu() {
    local postmaster total pid
    postmaster=$(head -1 "$work/pg/postmaster.pid")
    total=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$postmaster/stat")
    for pid in $(pgrep -P "$postmaster"); do
        total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
ticks=$(getconf CLK_TCK)
# takes NAME: the shared instance's tokengate_rate_limit_NAME_total (takes, or statements).
takes() { curl -s "http://127.0.0.1:$SHARED_ADMIN_PORT/metrics" | awk -v m="tokengate_rate_limit_$1_total" 'index($0, m) == 1 { n += $2 } END { print n + 0 }'; }
# measured PID PORT MODE: "req/s p99_ms tg_cpu_us pg_cpu_us takes_per_request statements_per_request"
# of one wrk run.
measured() {
    local pid=$1 port=$2 mode=$3 before after pg_before pg_after tb ta sb sa rps p50 p99 err
    before=$(cpu "$pid") pg_before=$(pg_cpu) tb=$(takes takes) sb=$(takes statements)
    read -r rps p50 p99 err <<<"$(wrk_run "http://127.0.0.1:$port/auth/token" -s bench/ratelimit.lua -- "$mode" "$route")"
    after=$(cpu "$pid") pg_after=$(pg_cpu) ta=$(takes takes) sa=$(takes statements)
    awk -v r="$rps" -v p="$(ms "$p99")" -v b="$before" -v a="$after" -v pb="$pg_before" -v pa="$pg_after" \
        -v tb="$tb" -v ta="$ta" -v sb="$sb" -v sa="$sa" -v t="$ticks" -v d="$duration" -v shared="$([ "$port" = $SHARED_PORT ] && echo 1 || echo 0)" \
        'BEGIN { n = r * d; printf "%s %s %.2f %.2f %s %s\n", r, p, (a - b) / t * 1e6 / n, (pa - pb) / t * 1e6 / n,
                 shared ? sprintf("%.4f", (ta - tb) / n) : "-", shared ? sprintf("%.4f", (sa - sb) / n) : "-" }'
}

variants=(unlimited memory shared shared-new shared-1k)
for v in nginx "${variants[@]}"; do : >"$work/$v.txt"; done
for _ in $(seq "$rounds"); do
    read -r n_rps _ n_p99 _ <<<"$(wrk_run "http://127.0.0.1:$NGINX_PORT/auth/token" -s bench/ratelimit.lua -- one)"
    echo "$n_rps $(ms "$n_p99")" >>"$work/nginx.txt"
    measured "${tg_pids[unlimited]}" $UNLIMITED_PORT distinct >>"$work/unlimited.txt"
    measured "${tg_pids[memory]}" $MEMORY_PORT one >>"$work/memory.txt"
    measured "${tg_pids[shared]}" $SHARED_PORT one >>"$work/shared.txt"
    measured "${tg_pids[shared]}" $SHARED_PORT distinct >>"$work/shared-new.txt"
    measured "${tg_pids[shared]}" $SHARED_PORT 1000 >>"$work/shared-1k.txt"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
n_rps=$(col "$work/nginx.txt" 1)
u_rps=$(col "$work/unlimited.txt" 1)
echo "Medians of $rounds rounds of ${duration}s, wrk -t2 -c$connections, $method ${path%%\?*} answered $expected (nginx: return 400) ($(nproc) cores)."
printf '%-11s %9s %8s %10s %10s %10s %10s %8s %8s  %s\n' target req/s p99_ms tg_cpu_us pg_cpu_us takes/req stmts/req x_unlim x_nginx spread_req/s
printf '%-11s %9.0f %8.3f %10s %10s %10s %10s %8s %8s  %s\n' nginx "$n_rps" "$(col "$work/nginx.txt" 2)" - - - - - 1.00 "$(awk '{print $1}' "$work/nginx.txt" | spread)"
for v in "${variants[@]}"; do
    f="$work/$v.txt"
    per() { if [ "$(awk -v c="$1" 'NR == 1 { print $c }' "$f")" = - ]; then echo -; else col "$f" "$1"; fi; }
    printf '%-11s %9.0f %8.3f %10.2f %10.2f %10s %10s %8s %8s  %s\n' "$v" "$(col "$f" 1)" "$(col "$f" 2)" "$(col "$f" 3)" "$(col "$f" 4)" \
        "$(per 5)" "$(per 6)" "$(ratio "$(col "$f" 1)" "$u_rps")" "$(ratio "$(col "$f" 1)" "$n_rps")" "$(awk '{print $1}' "$f" | spread)"
done
