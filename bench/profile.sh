#!/usr/bin/env bash
# Where the time of a cached proxied GET goes, TokenGate beside the C floor
# (bench/floor/proxy_floor.c) and the wrappers' floor (tokengate-bench-server's /loop/: the same
# hop through TGHTTPServer and TGHTTPClient on the connection's loop, as TokenGate's proxy sends
# it, doing per call what the C floor does and nothing of TokenGate's domain): CPU time per
# request by library, kernel included, from samples.
#
#   bench/profile.sh [SECONDS] [ROUNDS] [CONNECTIONS]
#
# bench/instructions.sh counts instructions, which are not time: an atomic reference count costs
# many cycles in one instruction, a system call's kernel work is no instruction of the process at
# all. This samples each process's CPU instead (`perf record -e cpu-clock`, 4999 Hz, no hardware
# counters needed) while wrk -t1 -cCONNECTIONS (default 64) loads it for SECONDS (default 6),
# the server, its upstream nginx and PostgreSQL pinned on SERVER_CPUS (default 1) and wrk on
# LOAD_CPUS (default 0), ROUNDS (default 2) rounds interleaved. Per target and round: req/s, and
# µs of CPU per request by library (samples × sample period ÷ requests; perf's own cost is in
# every figure alike); then the wrappers' floor's own code with its share of reference counting,
# and TokenGate's costliest functions, reference counting (`swift_retain`/`swift_release`) first.
# Medians over the rounds. TOKENGATE_BINARY=/path/to/tokengate profiles that build instead of
# this tree's release build. Everything stops by itself; nothing leaves loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
seconds=${1:-6}
rounds=${2:-2}
connections=${3:-64}
server_cpus=${SERVER_CPUS-1} load_cpus=${LOAD_CPUS-0}
# The upstream nginx and PostgreSQL share the server's core, as in bench/hop.sh's pinned runs.
export SERVER_CPUS=$server_cpus
EXTRA_PACKAGES="nginx wrk linux-perf" scripts/deps.sh
wrappers_floor_binary
tokengate_binary
build_floor -lmimalloc

work=$(mktemp -d /tmp/tokengate-bench-profile.XXXXXX)
chmod 755 "$work"
pids=()
trap 'stop_bench "$work" 25932' EXIT
NGINX_PORT=18680 UPSTREAM_PORT=18681 FLOOR_PORT=18683 WRAPPERS_PORT=18684 TG_PORT=18690 MOCK_PORT=18691

bench_api_stack "$work" 25932
start_tokengate "$work" $TG_PORT
token=$(login_token $TG_PORT)
taskset -c "$server_cpus" env $(floor_fields 127.0.0.1:$TG_PORT) "$floor" $FLOOR_PORT "http://127.0.0.1:$UPSTREAM_PORT" 1 >"$work/floor.log" 2>&1 &
floor_pid=$!
pids+=($floor_pid)
wait_for "http://127.0.0.1:$FLOOR_PORT/healthz"
start_wrappers_floor "$work" $WRAPPERS_PORT
pids+=($wrappers_pid)
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$WRAPPERS_PORT/loop/hello")
[ "$code" = 200 ] || { echo "bench: the wrappers' floor answered $code" >&2; exit 1; }
bearer=(-H "Authorization: Bearer $token")
code=$(curl -s -o /dev/null -w '%{http_code}' "${bearer[@]}" "http://127.0.0.1:$TG_PORT/api/bench/hello")
[ "$code" = 200 ] || { echo "bench: warm-up call answered $code" >&2; exit 1; }

# sample NAME PID URL ROUND: one profiled wrk run; writes WORK/NAME.ROUND.{data,requests}.
sample() {
    local name=$1 pid=$2 url=$3 round=$4
    taskset -c "$load_cpus" wrk -t1 -c"$connections" -d1s "${bearer[@]}" "$url" >/dev/null
    perf record -q -F 4999 -e cpu-clock -p "$pid" -o "$work/$name.$round.data" -- sleep "$seconds" >/dev/null 2>&1 &
    local recorder=$!
    # wrk runs a little longer than the recording, which sees load from start to end.
    taskset -c "$load_cpus" wrk -t1 -c"$connections" -d"$((seconds + 1))s" "${bearer[@]}" "$url" \
        | awk '/Requests\/sec/ { print $2 }' >"$work/$name.$round.rps"
    wait "$recorder" || true
}
for round in $(seq "$rounds"); do
    sample floor $floor_pid "http://127.0.0.1:$FLOOR_PORT/hello" "$round"
    sample wrappers $wrappers_pid "http://127.0.0.1:$WRAPPERS_PORT/loop/hello" "$round"
    sample tokengate "$tg_pid" "http://127.0.0.1:$TG_PORT/api/bench/hello" "$round"
done

# KEEP_PROFILES=DIR keeps the recordings (`perf report -i DIR/tokengate.1.data`).
[ -z "${KEEP_PROFILES:-}" ] || { mkdir -p "$KEEP_PROFILES" && cp "$work"/*.data "$work"/*.rps "$KEEP_PROFILES/"; }
echo "CPU per cached proxied GET by library (perf cpu-clock at 4999 Hz, wrk -t1 -c$connections on cpu $load_cpus, servers on cpu $server_cpus; medians of $rounds rounds of ${seconds}s)"
python3 - "$work" "$rounds" "$seconds" <<'PY'
import collections, statistics, subprocess, sys
work, rounds, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
period_us = 1e6 / 4999

def report(name, round_, sort):
    out = subprocess.run(['perf', 'report', '-i', f'{work}/{name}.{round_}.data', '--no-children', '--sort', sort,
                          '-q', '-g', 'none', '-F', 'sample,' + sort, '--percent-limit', '0'],
                         capture_output=True, text=True).stdout
    rows = collections.Counter()
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].isdigit():
            rows[parts[1].strip()] += int(parts[0])
    return rows

def short(dso):
    dso = dso.split('/')[-1]
    for prefix in ('libcurl', 'libmicrohttpd', 'libmimalloc', 'libc.so', 'libssl', 'libcrypto'):
        if dso.startswith(prefix): return prefix.replace('.so', '')
    return {'[kernel.kallsyms]': 'kernel', 'tokengate-proxy-floor': 'own code', 'tokengate': 'own code',
            'tokengate-bench-server': 'own code'}.get(dso, dso)

per_request = {}
rps = {}
for name in ('floor', 'wrappers', 'tokengate'):
    figures = collections.defaultdict(list)
    speeds = []
    for round_ in range(1, rounds + 1):
        requests = float(open(f'{work}/{name}.{round_}.rps').read().strip() or 0) * seconds
        speeds.append(requests / seconds)
        by_library = collections.Counter()
        for dso, samples in report(name, round_, 'dso').items():
            by_library[short(dso)] += samples
        total = sum(by_library.values())
        for library, samples in by_library.items():
            figures[library].append(samples * period_us / requests)
        figures['total'].append(total * period_us / requests)
    per_request[name] = {library: statistics.median(values + [0] * (rounds - len(values))) for library, values in figures.items()}
    rps[name] = statistics.median(speeds)

libraries = sorted({l for t in per_request.values() for l in t if l != 'total'}, key=lambda l: -per_request['tokengate'].get(l, 0))
print(f"{'µs per request':18s} {'floor':>8s} {'wrappers':>9s} {'tokengate':>10s} {'difference':>11s}")
for library in libraries + ['total']:
    f, w, t = (per_request[name].get(library, 0) for name in ('floor', 'wrappers', 'tokengate'))
    if max(f, w, t) < 0.05: continue
    print(f'{library:18s} {f:8.2f} {w:9.2f} {t:10.2f} {t - f:+11.2f}')
print(f"{'req/s':18s} {rps['floor']:8.0f} {rps['wrappers']:9.0f} {rps['tokengate']:10.0f}")
total = {name: per_request[name]['total'] for name in per_request}
print(f"CPU per request, TokenGate / floor: {total['tokengate'] / total['floor']:.2f}x; wrappers / floor: "
      f"{total['wrappers'] / total['floor']:.2f}x; TokenGate / wrappers: {total['tokengate'] / total['wrappers']:.2f}x")

def own_code(name, dso, label, count):
    symbols = collections.Counter()
    requests = 0.0
    for round_ in range(1, rounds + 1):
        requests += float(open(f'{work}/{name}.{round_}.rps').read().strip() or 0) * seconds
        out = subprocess.run(['perf', 'report', '-i', f'{work}/{name}.{round_}.data', '--no-children', '--sort', 'sym',
                              '--dsos', dso, '-q', '-g', 'none', '-F', 'sample,sym', '--percent-limit', '0'],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0].isdigit():
                symbols[parts[1].replace('[.]', '').strip()] += int(parts[0])
    own = sum(symbols.values())
    counting = sum(c for s, c in symbols.items() if s.split()[0] in ('swift_retain', 'swift_release', 'swift_retain_n', 'swift_release_n',
                                                                      'swift_bridgeObjectRetain', 'swift_bridgeObjectRelease'))
    if not own: return
    print(f'{label} own code: {own * period_us / requests:.2f} µs per request, of which reference counting '
          f'{counting * period_us / requests:.2f} µs ({100 * counting / own:.0f} %)' + ('; costliest functions:' if count else ''))
    top = symbols.most_common(count)
    names = subprocess.run(['swift', 'demangle', '--simplified'], input='\n'.join(s for s, _ in top), capture_output=True, text=True).stdout.splitlines()
    for (_, samples), symbol in zip(top, names):
        print(f'  {samples * period_us / requests:6.2f}  {symbol[:100]}')

own_code('wrappers', 'tokengate-bench-server', "The wrappers' floor's", 0)
own_code('tokengate', 'tokengate', 'TokenGate', 12)
PY
