#!/usr/bin/env bash
# The cached proxied call with a DPoP-bound token (RFC 9449), next to the same call with a bearer
# token and to nginx `proxy_pass`, on loopback, in one run.
#
#   bench/dpop.sh [DURATION_SECONDS] [CONNECTIONS] [ROUNDS]
#   DPOP_BASELINE=/path/to/older/tokengate bench/dpop.sh ...
#
# Starts a throwaway PostgreSQL, oidc-provider-mock, nginx and a release `tokengate serve` whose
# bench app allows DPoP, logs `alice` in twice (a bearer session, and one bound to a P-256 key of
# scripts/dpop_proof.py), then per round, alternating: nginx, TokenGate with the bearer token, and
# TokenGate with the bound token, wrk -t2 -cCONNECTIONS on GET /api/bench/hello (session and
# upstream token in memory). A bound call needs a fresh proof each (a proof is accepted once by
# every instance: each is recorded in PostgreSQL, docs/architecture.md "DPoP"): the proofs are
# made before each round (the machine otherwise idle) and wrk sends each once (bench/dpop.lua).
# With DPOP_BASELINE, another binary (an older build, e.g. one that checked proofs in memory
# only) serves the same configuration on a database of its own, and its bound call is measured
# in the same rounds. Pinned on a machine of 2 or more cores: TokenGate, PostgreSQL and nginx on
# SERVER_CPUS (default 1), wrk on LOAD_CPUS (default 0). Prints medians of req/s, p99 and
# TokenGate's CPU time per request, the ratios to nginx, and what DPoP adds per call.
# Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
duration=${1:-10}
connections=${2:-64}
rounds=${3:-3}
if [ "$(nproc)" -ge 2 ]; then
    SERVER_CPUS=${SERVER_CPUS-1} LOAD_CPUS=${LOAD_CPUS-0}
fi
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh
release_build tokengate

work=$(mktemp -d /tmp/tokengate-bench-dpop.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() { stop_bench "$work" 25532; }
trap cleanup EXIT
NGINX_PORT=18280 UPSTREAM_PORT=18281 TG_PORT=18290 MOCK_PORT=18291 BASE_PORT=18293
# The admin listener, for /metrics at the end.
export TOKENGATE_ADMIN_PORT=18292

database_url=$(bench_database "$work" 25532)
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT "location / { proxy_pass http://backend; $PROXY_TO_BACKEND }"
start_provider "$work" $MOCK_PORT
# configure DIR PORT DATABASE_URL: the bench configuration, its app allowing DPoP; proofs made
# before a round stay acceptable for its whole length.
configure() {
    mkdir -p "$1"
    bench_configuration "$1/tokengate.yaml" "$2" "$3" $MOCK_PORT "" \
        "name: bench, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, max_connections: 64"
    sed -i 's|redirect_uris: \["com.example.app:/cb"\] }|redirect_uris: ["com.example.app:/cb"], dpop: allowed }|' "$1/tokengate.yaml"
    echo "dpop: { proof_max_age_seconds: 600, replay_cache_entries: 20000000 }" >>"$1/tokengate.yaml"
}
configure "$work" $TG_PORT "$database_url"
start_tokengate "$work" $TG_PORT
if [ -n "${DPOP_BASELINE:-}" ]; then
    psql=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql | sort -V | tail -n 1)
    "$psql" "${database_url%/*}/postgres" -qAt -c "CREATE DATABASE baseline" >/dev/null
    configure "$work/baseline" $BASE_PORT "${database_url%/*}/baseline"
    new_bindir=$bindir bindir=$(dirname "$DPOP_BASELINE") new_pid=$tg_pid
    TOKENGATE_ADMIN_PORT=0 start_tokengate "$work/baseline" $BASE_PORT
    base_pid=$tg_pid bindir=$new_bindir tg_pid=$new_pid
fi

key="$work/dpop-key.pem"
# bound_token PORT: alice's access token bound to $key, from the TokenGate on PORT.
bound_token() {
    python3 scripts/mock_login.py "http://127.0.0.1:$1" bench-app com.example.app:/cb alice "$key" |
        python3 -c 'import json, sys; t = json.load(sys.stdin); assert t["token_type"] == "DPoP", t; print(t["access_token"])'
}
# warm PORT TOKEN [bearer]: one call, which loads session and upstream token into memory.
warm() {
    local url="http://127.0.0.1:$1/api/bench/hello" code
    if [ "${3:-}" = bearer ]; then
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" "$url")
    else
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: DPoP $2" -H "DPoP: $(python3 scripts/dpop_proof.py "$key" GET "$url" "$2")" "$url")
    fi
    [ "$code" = 200 ] || { echo "bench: warm-up call on port $1 answered $code" >&2; tail -5 "$work/tg.log" >&2; exit 1; }
}
bearer=$(login_token $TG_PORT)
bound=$(bound_token $TG_PORT)
warm $TG_PORT "$bearer" bearer
warm $TG_PORT "$bound"
if [ -n "${DPOP_BASELINE:-}" ]; then
    base_bound=$(bound_token $BASE_PORT)
    warm $BASE_PORT "$base_bound"
fi

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# pg_cpu: CPU ticks of PostgreSQL's postmaster and its children (the pool's backends live on).
pg_cpu() {
    local postmaster
    postmaster=$(head -1 "$work/pg/postmaster.pid")
    { echo "$postmaster"; ps --ppid "$postmaster" -o pid=; } | while read -r pid; do cat "/proc/$pid/stat" 2>/dev/null; done |
        awk '{ sum += $14 + $15 } END { print sum + 0 }'
}
ticks=$(getconf CLK_TCK)
# measured PID COMMAND...: runs wrk (COMMAND) against the TokenGate of PID; prints "req/s p99_ms
# cpu_us_per_request pg_cpu_us_per_request errors".
measured() {
    local pid=$1 before after pg_before pg_after rps p50 p99 err
    shift
    before=$(cpu "$pid") pg_before=$(pg_cpu)
    read -r rps p50 p99 err <<<"$("$@")"
    after=$(cpu "$pid") pg_after=$(pg_cpu)
    awk -v r="$rps" -v p="$(ms "$p99")" -v b="$before" -v a="$after" -v pb="$pg_before" -v pa="$pg_after" -v t="$ticks" -v d="$duration" -v e="$err" \
        'BEGIN { n = r * d; printf "%s %s %.2f %.2f %s\n", r, p, (a - b) / t * 1e6 / n, (pa - pb) / t * 1e6 / n, e }'
}
# proofs COUNT URL TOKEN: COUNT fresh proofs for TOKEN at URL in $work/proofs, by two processes.
proofs() {
    local half=$((($1 + 1) / 2))
    python3 scripts/dpop_proof.py --many "$half" "$key" GET "$2" "$3" >"$work/proofs.1" &
    python3 scripts/dpop_proof.py --many "$half" "$key" GET "$2" "$3" >"$work/proofs.2"
    wait $!
    cat "$work/proofs.1" "$work/proofs.2" >"$work/proofs"
}
# bound_round PID PORT TOKEN FILE: one round of bound calls to the TokenGate on PORT, into FILE.
bound_round() {
    local url="http://127.0.0.1:$2/api/bench/hello" rps p99 cpu pg err
    # As many proofs as the bearer call's rate would need: a bound call is not faster.
    proofs "$(awk -v r="$b_rps" -v d="$duration" 'BEGIN { printf "%d", r * d * 1.05 + 1000 }')" "$url" "$3"
    read -r rps p99 cpu pg err <<<"$(measured "$1" wrk_run "$url" -s bench/dpop.lua -- "$work/proofs" 2 "$3" /api/bench/hello)"
    echo "$rps $p99 $cpu $pg" >>"$4"
    [ "$err" = none ] || errors="$errors $(basename "$4"): $err"
}

: >"$work/n" && : >"$work/b" && : >"$work/d" && : >"$work/o"
errors=""
for _ in $(seq "$rounds"); do
    read -r n_rps _ n_p99 _ <<<"$(wrk_run "http://127.0.0.1:$NGINX_PORT/hello" -H "Authorization: Bearer $bearer")"
    echo "$n_rps $(ms "$n_p99")" >>"$work/n"
    read -r b_rps b_p99 b_cpu b_pg b_err <<<"$(measured "$tg_pid" wrk_run "http://127.0.0.1:$TG_PORT/api/bench/hello" -H "Authorization: Bearer $bearer")"
    echo "$b_rps $b_p99 $b_cpu $b_pg" >>"$work/b"
    [ "$b_err" = none ] || errors="$errors bearer: $b_err"
    bound_round "$tg_pid" $TG_PORT "$bound" "$work/d"
    [ -z "${DPOP_BASELINE:-}" ] || bound_round "$base_pid" $BASE_PORT "$base_bound" "$work/o"
done
n_rps=$(col "$work/n" 1) n_p99=$(col "$work/n" 2)
b_rps=$(col "$work/b" 1) b_p99=$(col "$work/b" 2) b_cpu=$(col "$work/b" 3) b_pg=$(col "$work/b" 4)
d_rps=$(col "$work/d" 1) d_p99=$(col "$work/d" 2) d_cpu=$(col "$work/d" 3) d_pg=$(col "$work/d" 4)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
metrics="http://127.0.0.1:$TOKENGATE_ADMIN_PORT/metrics"
loop_calls=$(curl -s "$metrics" | awk '/^tokengate_proxy_calls_total\{path="loop"\}/ {print $2}')
task_calls=$(curl -s "$metrics" | awk '/^tokengate_proxy_calls_total\{path="task"\}/ {print $2}')
echo "Medians of $rounds rounds of ${duration}s, wrk -t2 -c$connections on cpu ${LOAD_CPUS:-any}, GET /api/bench/hello (cached);" \
    "TokenGate, PostgreSQL and nginx (worker_processes auto) on cpu ${SERVER_CPUS:-any} of $(nproc)."
printf '%-14s %10s %8s %10s %9s %8s %7s\n' target req/s p99_ms cpu_us/req pg_us/req rps_x p99_x
printf '%-14s %10.0f %8.3f %10s %9s %8s %7s\n' nginx "$n_rps" "$n_p99" - - 1.00 1.00
printf '%-14s %10.0f %8.3f %10.2f %9.2f %8s %7s\n' bearer "$b_rps" "$b_p99" "$b_cpu" "$b_pg" "$(ratio "$b_rps" "$n_rps")" "$(ratio "$b_p99" "$n_p99")"
printf '%-14s %10.0f %8.3f %10.2f %9.2f %8s %7s\n' dpop "$d_rps" "$d_p99" "$d_cpu" "$d_pg" "$(ratio "$d_rps" "$n_rps")" "$(ratio "$d_p99" "$n_p99")"
if [ -n "${DPOP_BASELINE:-}" ]; then
    o_rps=$(col "$work/o" 1) o_p99=$(col "$work/o" 2) o_cpu=$(col "$work/o" 3) o_pg=$(col "$work/o" 4)
    printf '%-14s %10.0f %8.3f %10.2f %9.2f %8s %7s\n' dpop-baseline "$o_rps" "$o_p99" "$o_cpu" "$o_pg" "$(ratio "$o_rps" "$n_rps")" "$(ratio "$o_p99" "$n_p99")"
    echo "this build's bound call against the baseline's: req/s x$(ratio "$d_rps" "$o_rps"), TokenGate CPU per call x$(ratio "$d_cpu" "$o_cpu")" \
        "(+$(awk -v d="$d_cpu" -v o="$o_cpu" 'BEGIN{printf "%.2f", d - o}') us); baseline req/s spread $(awk '{print $1}' "$work/o" | spread)"
fi
echo "pg_us/req: PostgreSQL's CPU per call (every backend of its one cluster; the baseline's database is in it too)."
echo "DPoP per call: +$(awk -v d="$d_cpu" -v b="$b_cpu" 'BEGIN{printf "%.2f", d - b}') us of TokenGate's CPU (x$(ratio "$d_cpu" "$b_cpu") of the bearer call), req/s x$(ratio "$d_rps" "$b_rps") of the bearer call"
echo "spread (min-max of $rounds rounds): dpop req/s $(awk '{print $1}' "$work/d" | spread), bearer req/s $(awk '{print $1}' "$work/b" | spread), nginx req/s $(awk '{print $1}' "$work/n" | spread)"
echo "proxied calls answered on the event loop: ${loop_calls:-0}, in a task: ${task_calls:-0}; errors: ${errors:-none}"
