#!/usr/bin/env bash
# Two builds of TokenGate compared on one path, both serving at once and loaded at the same time,
# so that the machine's drift (more than 10 % between runs here) hits both alike.
#
#   bench/ab.sh ROUNDS BINARY_A BINARY_B [PATH] [SECONDS]
#
# BINARY_A and BINARY_B are `tokengate` executables (say, a release build of main copied aside and
# one of a change). Starts a throwaway PostgreSQL, oidc-provider-mock and an nginx upstream, runs
# both binaries with the same configuration (two ports, a database each), logs in on each, then for
# each round runs `wrk -t1 -c32` against both at the same time for SECONDS (default 4) on PATH
# (default the cached proxied call, /api/bench/hello) and prints each process's CPU time (user +
# system) per request and B/A. The last line: the median of B/A over the rounds, its spread, and
# the mean CPU per request of each. The same binary on both sides gives B/A within about ±10 % per
# round and a median within ±2 % (8 rounds). Nothing leaves loopback.
#
# USERS=N (default 1) logs N users in and sends their tokens in turn (bench/tokens.lua);
# SESSIONS_A and SESSIONS_B are `sessions:` keys for A's and B's configuration. Together they
# measure the cache-miss path: `USERS=8 SESSIONS_B="memory_cache_entries: 1"` keeps one session
# and one upstream token in memory, so nearly every call loads both (for a build without that
# setting, one whose `CredentialCache` holds one entry).
#
# LOG_A and LOG_B replace the `log:` section's keys of A's and B's configuration (default
# `level: warning, access_log: false`). With one binary on both sides they measure what a setting
# costs: `LOG_B="level: info, access_log: true" bench/ab.sh 8 T T` is the access log's price
# (each side's output goes to a file in the work directory).
#
# SERVER_CPUS and LOAD_CPUS (taskset lists, bench/lib.sh) pin both builds, their database and the
# nginx upstream, and both wrk: `SERVER_CPUS=1 LOAD_CPUS=0` has both builds share one core, as
# bench/hop.sh's pinned placement has TokenGate alone. Unset: not pinned.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:?rounds}
binary_a=$(realpath "${2:?binary A}")
binary_b=$(realpath "${3:?binary B}")
path=${4:-/api/bench/hello}
seconds=${5:-4}
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh

work=$(mktemp -d /tmp/tokengate-bench-ab.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    stop_bench "$work" 25532
}
trap cleanup EXIT

NGINX_PORT=18280 UPSTREAM_PORT=18281 PORT_A=18290 PORT_B=18292 MOCK_PORT=18291

database_url=$(bench_database "$work" 25532)
reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT "location / { return 404; }"
start_provider "$work" $MOCK_PORT
bench_secret=$(openssl rand -base64 32)
options="connection_limit: 30000, max_connections_per_ip: 0"
upstream="name: bench, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, max_connections: 64"
# A database each: two builds may want different schema versions (an older one refuses a newer
# schema). Both on the one cluster, so both pay PostgreSQL alike.
psql=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql | sort -V | tail -n 1)
"$psql" "$database_url" -qAt -c "CREATE DATABASE bench_b" >/dev/null
bench_log=${LOG_A:-} bench_configuration "$work/a.yaml" $PORT_A "$database_url" $MOCK_PORT "$options" "$upstream"
bench_log=${LOG_B:-} bench_configuration "$work/b.yaml" $PORT_B "${database_url%/*}/bench_b" $MOCK_PORT "$options" "$upstream"
[ -z "${SESSIONS_A:-}" ] || echo "sessions: { $SESSIONS_A }" >>"$work/a.yaml"
[ -z "${SESSIONS_B:-}" ] || echo "sessions: { $SESSIONS_B }" >>"$work/b.yaml"
"$binary_a" migrate --config "$work/a.yaml" >/dev/null
"$binary_b" migrate --config "$work/b.yaml" >/dev/null
${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$binary_a" serve --config "$work/a.yaml" >"$work/a.log" 2>&1 &
pid_a=$!
pids+=($pid_a)
${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$binary_b" serve --config "$work/b.yaml" >"$work/b.log" 2>&1 &
pid_b=$!
pids+=($pid_b)
for side in a b; do
    port=$PORT_A
    [ $side = a ] || port=$PORT_B
    (wait_for "http://127.0.0.1:$port/readyz") || { tail -n 5 "$work/$side.log" >&2; exit 1; }
done
# One login per user on each side (each its own database); the same users on both.
users=${USERS:-1}
for side in a b; do
    port=$PORT_A
    [ $side = a ] || port=$PORT_B
    : >"$work/tokens-$side"
    for user in $(seq "$users"); do
        name=alice
        [ "$user" = 1 ] || name=user$user
        answer=$(python3 scripts/mock_login.py "http://127.0.0.1:$port" bench-app com.example.app:/cb "$name") ||
            { echo "bench: login on $side failed; its log ends:" >&2; tail -n 5 "$work/$side.log" >&2; exit 1; }
        python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])' <<<"$answer" >>"$work/tokens-$side"
    done
    while read -r each; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $each" "http://127.0.0.1:$port$path")
        [ "$code" = 200 ] || { echo "bench: warm-up call to $port answered $code" >&2; exit 1; }
    done <"$work/tokens-$side"
done
# load PORT SIDE: wrk on PORT for the round (one token, or the users' in turn).
load() {
    if [ "$users" = 1 ]; then
        ${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} wrk -t1 -c32 -d"${seconds}s" -H "Authorization: Bearer $(cat "$work/tokens-$2")" "http://127.0.0.1:$1$path"
    else
        ${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} wrk -t1 -c32 -d"${seconds}s" -s bench/tokens.lua "http://127.0.0.1:$1$path" -- "$work/tokens-$2" "$path"
    fi
}

cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)
: >"$work/rounds"
for round in $(seq "$rounds"); do
    a0=$(cpu $pid_a) b0=$(cpu $pid_b)
    load $PORT_A a >"$work/wrk-a" &
    wrk_a=$!
    load $PORT_B b >"$work/wrk-b"
    wait $wrk_a
    a1=$(cpu $pid_a) b1=$(cpu $pid_b)
    n_a=$(awk '/requests in/ {print $1}' "$work/wrk-a") n_b=$(awk '/requests in/ {print $1}' "$work/wrk-b")
    # An answer other than 200 is not the path measured: said, never averaged in silently.
    for side in a b; do
        ! grep -q "Non-2xx" "$work/wrk-$side" || echo "round $round: $side had $(grep Non-2xx "$work/wrk-$side")" >&2
    done
    awk -v na="$n_a" -v nb="$n_b" -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v t="$ticks" -v s="$seconds" -v r="$round" \
        'BEGIN { ca = a / t * 1e6 / na; cb = b / t * 1e6 / nb; printf "%.2f %.2f %.3f %d %d\n", ca, cb, cb / ca, na / s, nb / s
                 printf "round %d: A %.2f us/req (%d req/s)  B %.2f us/req (%d req/s)  B/A %.3f\n", r, ca, na / s, cb, nb / s, cb / ca > "/dev/stderr" }' \
        >>"$work/rounds"
done
sort -g -k3 "$work/rounds" | awk -v p="$path" '{ r[NR] = $3; a += $1; b += $2 }
    END { printf "%s: B/A median %.3f (min %.3f, max %.3f, %d rounds); mean CPU per request A %.2f us, B %.2f us\n",
          p, (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2, r[1], r[NR], NR, a / NR, b / NR }'
# What each side wrote (its access log, when its `log:` keys turn it on): a measured setting
# that wrote nothing was not measured.
echo "output lines: A $(wc -l <"$work/a.log"), B $(wc -l <"$work/b.log")"
