#!/usr/bin/env bash
# The cached proxied call with a DPoP-bound token (RFC 9449), next to the same call with a bearer
# token and to nginx `proxy_pass`, on loopback, in one run.
#
#   bench/dpop.sh [DURATION_SECONDS] [CONNECTIONS] [ROUNDS]
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, nginx and a release `tokengate serve` whose
# bench app allows DPoP, logs `alice` in twice (a bearer session, and one bound to a P-256 key of
# scripts/dpop_proof.py), then per round, alternating: nginx, TokenGate with the bearer token, and
# TokenGate with the bound token, wrk -t2 -cCONNECTIONS on GET /api/bench/hello (session and
# upstream token in memory: the call is answered on the event loop). A bound call needs a fresh
# proof each (TokenGate refuses a proof it saw): the proofs are made before each round (the
# machine otherwise idle) and wrk sends each once (bench/dpop.lua). Prints medians of req/s, p99
# and TokenGate's CPU time per request, the ratios to nginx, and what DPoP adds per call.
# Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
duration=${1:-10}
connections=${2:-64}
rounds=${3:-3}
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh
release_build tokengate

work=$(mktemp -d /tmp/tokengate-bench-dpop.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() { stop_bench "$work" 25532; }
trap cleanup EXIT
NGINX_PORT=18280 UPSTREAM_PORT=18281 TG_PORT=18290 MOCK_PORT=18291
# The admin listener, for /metrics at the end.
export TOKENGATE_ADMIN_PORT=18292

database_url=$(bench_database "$work" 25532)
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT "location / { proxy_pass http://backend; $PROXY_TO_BACKEND }"
start_provider "$work" $MOCK_PORT
bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT "" \
    "name: bench, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, max_connections: 64"
# The bench app allows DPoP; proofs made before a round stay acceptable for its whole length.
sed -i 's|redirect_uris: \["com.example.app:/cb"\] }|redirect_uris: ["com.example.app:/cb"], dpop: allowed }|' "$work/tokengate.yaml"
echo "dpop: { proof_max_age_seconds: 600, replay_cache_entries: 20000000 }" >>"$work/tokengate.yaml"
start_tokengate "$work" $TG_PORT

base="http://127.0.0.1:$TG_PORT"
url="$base/api/bench/hello"
key="$work/dpop-key.pem"
bearer=$(login_token $TG_PORT)
bound=$(python3 scripts/mock_login.py "$base" bench-app com.example.app:/cb alice "$key" |
    python3 -c 'import json, sys; t = json.load(sys.stdin); assert t["token_type"] == "DPoP", t; print(t["access_token"])')
# Warm: the upstream token is fetched once, then both sessions are served from memory.
for attempt in bearer bound; do
    if [ $attempt = bearer ]; then
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bearer" "$url")
    else
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: DPoP $bound" -H "DPoP: $(python3 scripts/dpop_proof.py "$key" GET "$url" "$bound")" "$url")
    fi
    [ "$code" = 200 ] || { echo "bench: warm-up call ($attempt) answered $code" >&2; tail -5 "$work/tg.log" >&2; exit 1; }
done

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)
# measured COMMAND...: runs wrk (COMMAND) against TokenGate; prints "req/s p99_ms cpu_us_per_request errors".
measured() {
    local before after rps p50 p99 err
    before=$(cpu "$tg_pid")
    read -r rps p50 p99 err <<<"$("$@")"
    after=$(cpu "$tg_pid")
    awk -v r="$rps" -v p="$(ms "$p99")" -v b="$before" -v a="$after" -v t="$ticks" -v d="$duration" -v e="$err" \
        'BEGIN { printf "%s %s %.2f %s\n", r, p, (a - b) / t * 1e6 / (r * d), e }'
}
# proofs COUNT: COUNT fresh proofs for the bound token in $work/proofs, made by two processes.
proofs() {
    local half=$((($1 + 1) / 2))
    python3 scripts/dpop_proof.py --many "$half" "$key" GET "$url" "$bound" >"$work/proofs.1" &
    python3 scripts/dpop_proof.py --many "$half" "$key" GET "$url" "$bound" >"$work/proofs.2"
    wait $!
    cat "$work/proofs.1" "$work/proofs.2" >"$work/proofs"
}

: >"$work/n" && : >"$work/b" && : >"$work/d"
errors=""
for _ in $(seq "$rounds"); do
    read -r n_rps _ n_p99 _ <<<"$(wrk_run "http://127.0.0.1:$NGINX_PORT/hello" -H "Authorization: Bearer $bearer")"
    echo "$n_rps $(ms "$n_p99")" >>"$work/n"
    read -r b_rps b_p99 b_cpu b_err <<<"$(measured wrk_run "$url" -H "Authorization: Bearer $bearer")"
    echo "$b_rps $b_p99 $b_cpu" >>"$work/b"
    # As many proofs as the bearer call's rate would need: a bound call is not faster.
    proofs "$(awk -v r="$b_rps" -v d="$duration" 'BEGIN { printf "%d", r * d * 1.05 + 1000 }')"
    read -r d_rps d_p99 d_cpu d_err <<<"$(measured wrk_run "$url" -s bench/dpop.lua -- "$work/proofs" 2 "$bound" /api/bench/hello)"
    echo "$d_rps $d_p99 $d_cpu" >>"$work/d"
    [ "$d_err" = none ] || errors="$d_err"
    [ "$b_err" = none ] || errors="$errors bearer: $b_err"
done
n_rps=$(col "$work/n" 1) n_p99=$(col "$work/n" 2)
b_rps=$(col "$work/b" 1) b_p99=$(col "$work/b" 2) b_cpu=$(col "$work/b" 3)
d_rps=$(col "$work/d" 1) d_p99=$(col "$work/d" 2) d_cpu=$(col "$work/d" 3)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
metrics="http://127.0.0.1:$TOKENGATE_ADMIN_PORT/metrics"
loop_calls=$(curl -s "$metrics" | awk '/^tokengate_proxy_calls_total\{path="loop"\}/ {print $2}')
task_calls=$(curl -s "$metrics" | awk '/^tokengate_proxy_calls_total\{path="task"\}/ {print $2}')
echo "Medians of $rounds rounds of ${duration}s, wrk -t2 -c$connections, GET /api/bench/hello (cached), nginx worker_processes auto ($(nproc) cores)."
printf '%-12s %10s %8s %10s %8s %7s  %s\n' target req/s p99_ms cpu_us/req rps_x p99_x errors
printf '%-12s %10.0f %8.3f %10s %8s %7s  %s\n' nginx "$n_rps" "$n_p99" - 1.00 1.00 -
printf '%-12s %10.0f %8.3f %10.2f %8s %7s  %s\n' bearer "$b_rps" "$b_p99" "$b_cpu" "$(ratio "$b_rps" "$n_rps")" "$(ratio "$b_p99" "$n_p99")" -
printf '%-12s %10.0f %8.3f %10.2f %8s %7s  %s\n' dpop "$d_rps" "$d_p99" "$d_cpu" "$(ratio "$d_rps" "$n_rps")" "$(ratio "$d_p99" "$n_p99")" "${errors:-none}"
echo "DPoP per call: +$(awk -v d="$d_cpu" -v b="$b_cpu" 'BEGIN{printf "%.2f", d - b}') us of TokenGate's CPU (x$(ratio "$d_cpu" "$b_cpu") of the bearer call), req/s x$(ratio "$d_rps" "$b_rps") of the bearer call"
echo "spread (min-max of $rounds rounds): dpop req/s $(awk '{print $1}' "$work/d" | spread), bearer req/s $(awk '{print $1}' "$work/b" | spread), nginx req/s $(awk '{print $1}' "$work/n" | spread)"
echo "proxied calls answered on the event loop: $loop_calls, in a task: $task_calls"
