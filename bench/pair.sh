#!/usr/bin/env bash
# CPU per cached proxied GET of TokenGate, the C floor (bench/floor/proxy_floor.c) and the
# wrappers' floor (tokengate-bench-server's /loop/), compared round by round: the ratio a change
# must move, with a spread small enough to see it.
#
#   bench/pair.sh [ROUNDS] [SECONDS] [MODE]
#
# bench/hop.sh measures each target for 8 s in turn, and on this VM a round can run at a third of
# the speed of the next (its req/s spreads go from 10k to 30k in one run): the median CPU ratio of
# one hop.sh run moved by more than the distance to the goal (1.07× and 1.30× in two runs half an
# hour apart). Here each round measures the three within seconds of each other and yields its own
# ratios; the medians of ROUNDS (default 20) rounds are what it reports, with their spread.
# MODE `turns` (default): each target alone for SECONDS (default 2), in turn, as hop.sh's pinned
# placement loads it (wrk -t1 -c64); `together`: all three at once, each under its own wrk -t1
# -c32, for SECONDS, so the same seconds hit all three alike (each then answers about a third as
# many requests a second and batches fewer a wake-up, which brings every ratio toward 1).
# The servers and the upstream nginx on SERVER_CPUS (default 1), wrk on LOAD_CPUS (default 0);
# CPU is each process's user + system time over its round; beside it, how often per call the
# kernel took the core from the target (its threads' involuntary context switches: at full load a
# loop never sleeps, and an upstream on its core wakes and preempts it about once a call).
# UPSTREAM_CPUS moves the upstream nginx to other cores (default: SERVER_CPUS, hop.sh's
# placement). TOKENGATE_BINARY=/path/to/tokengate measures that build. Starts a throwaway
# PostgreSQL, oidc-provider-mock and the upstream; nothing leaves loopback; everything stops by
# itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-20}
seconds=${2:-2}
mode=${3:-turns}
case $mode in turns | together) ;; *) echo "bench: MODE is turns or together" >&2; exit 2 ;; esac
export SERVER_CPUS=${SERVER_CPUS-1}
load_cpus=${LOAD_CPUS-0}
EXTRA_PACKAGES="nginx wrk" scripts/deps.sh
wrappers_floor_binary
tokengate_binary
build_floor -lmimalloc

work=$(mktemp -d /tmp/tokengate-bench-pair.XXXXXX)
chmod 755 "$work"
pids=()
trap 'stop_bench "$work" 26032' EXIT
NGINX_PORT=18980 UPSTREAM_PORT=18981 FLOOR_PORT=18983 WRAPPERS_PORT=18984 TG_PORT=18990 MOCK_PORT=18991

bench_api_stack "$work" 26032
if [ -n "${UPSTREAM_CPUS:-}" ]; then
    master=$(cat "$work/nginx.pid")
    for pid in $master $(pgrep -P "$master"); do taskset -a -p -c "$UPSTREAM_CPUS" "$pid" >/dev/null; done
fi
start_tokengate "$work" $TG_PORT
token=$(login_token $TG_PORT)
taskset -c "$SERVER_CPUS" env $(floor_fields 127.0.0.1:$TG_PORT) "$floor" $FLOOR_PORT "http://127.0.0.1:$UPSTREAM_PORT" 1 >"$work/floor.log" 2>&1 &
floor_pid=$!
pids+=($floor_pid)
wait_for "http://127.0.0.1:$FLOOR_PORT/healthz"
start_wrappers_floor "$work" $WRAPPERS_PORT
pids+=($wrappers_pid)
bearer=(-H "Authorization: Bearer $token")
urls=("http://127.0.0.1:$FLOOR_PORT/hello" "http://127.0.0.1:$WRAPPERS_PORT/loop/hello" "http://127.0.0.1:$TG_PORT/api/bench/hello")
for url in "${urls[@]}"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "${bearer[@]}" "$url")
    [ "$code" = 200 ] || { echo "bench: warm-up call to $url answered $code" >&2; exit 1; }
done

# CPU ticks, involuntary context switches (all threads), minor page faults.
usage() {
    echo "$(awk '{ print $14 + $15 }' "/proc/$1/stat"):$(cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^nonvoluntary/ { n += $2 } END { print n }'):$(awk '{ print $10 }' "/proc/$1/stat")"
}
ticks=$(getconf CLK_TCK)
targets=(floor wrappers tokengate)
target_pids=("$floor_pid" "$wrappers_pid" "$tg_pid")
: >"$work/rounds"
for round in $(seq "$rounds"); do
    before=() after=()
    if [ "$mode" = together ]; then
        for pid in "${target_pids[@]}"; do before+=("$(usage "$pid")"); done
        loads=()
        for index in 0 1 2; do
            taskset -c "$load_cpus" wrk -t1 -c32 -d"${seconds}s" "${bearer[@]}" "${urls[$index]}" >"$work/wrk.$index" &
            loads+=($!)
        done
        wait "${loads[@]}"
        for pid in "${target_pids[@]}"; do after+=("$(usage "$pid")"); done
    else
        for index in 0 1 2; do
            before+=("$(usage "${target_pids[$index]}")")
            taskset -c "$load_cpus" wrk -t1 -c64 -d"${seconds}s" "${bearer[@]}" "${urls[$index]}" >"$work/wrk.$index"
            after+=("$(usage "${target_pids[$index]}")")
        done
    fi
    line=""
    for index in 0 1 2; do
        ! grep -q "Non-2xx" "$work/wrk.$index" || echo "round $round: ${targets[$index]} had $(grep Non-2xx "$work/wrk.$index")" >&2
        requests=$(awk '/requests in/ { print $1 }' "$work/wrk.$index")
        line+=" $(awk -v a="${after[$index]}" -v b="${before[$index]}" -v t="$ticks" -v n="$requests" \
            'BEGIN { split(a, x, ":"); split(b, y, ":"); printf "%.2f %d %.3f %.3f", (x[1] - y[1]) / t * 1e6 / n, n, (x[2] - y[2]) / n, (x[3] - y[3]) / n }')"
    done
    echo "$line" >>"$work/rounds"
    awk -v r="$round" -v s="$seconds" '{ printf "round %d: floor %.2f µs (%d req/s, %.2f preempted, %.2f faults), wrappers %.2f µs (%d req/s, %.2f, %.2f), TokenGate %.2f µs (%d req/s, %.2f, %.2f): TokenGate/floor %.3f, wrappers/floor %.3f\n",
        r, $1, $2 / s, $3, $4, $5, $6 / s, $7, $8, $9, $10 / s, $11, $12, $9 / $1, $5 / $1 }' <<<"$line"
done
python3 - "$work/rounds" "$mode" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
def summary(label, values):
    return f'{label} {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})'
floor, wrappers, tokengate = [r[0] for r in rows], [r[4] for r in rows], [r[8] for r in rows]
print(f'{len(rows)} rounds ({sys.argv[2]}), CPU µs per request (medians): floor {statistics.median(floor):.2f}, '
      f'wrappers {statistics.median(wrappers):.2f}, TokenGate {statistics.median(tokengate):.2f}')
print('involuntary context switches per request (medians): ' + ', '.join(
    f'{name} {statistics.median(r[column] for r in rows):.3f}' for name, column in (('floor', 2), ('wrappers', 6), ('TokenGate', 10))))
print('minor page faults per request (medians): ' + ', '.join(
    f'{name} {statistics.median(r[column] for r in rows):.3f}' for name, column in (('floor', 3), ('wrappers', 7), ('TokenGate', 11))))
print('per-round ratios, median (spread): ' + ', '.join([
    summary('TokenGate/floor', [t / f for t, f in zip(tokengate, floor)]),
    summary('wrappers/floor', [w / f for w, f in zip(wrappers, floor)]),
    summary('TokenGate/wrappers', [t / w for t, w in zip(tokengate, wrappers)])]))
PY
