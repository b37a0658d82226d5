#!/usr/bin/env bash
# Writes scripts/symbol-order.txt: the functions a release `tokengate serve` runs, in the
# order the linker lays them out (docs/architecture.md, "Memory under a burst"). The release link
# passes the file to lld (`--symbol-ordering-file`, Package.swift), so the code a running gateway
# uses sits together in a few megabytes at the start of `.text` instead of being spread over all of
# it, where every page the kernel maps in (64 KiB at a time, with its fault-around) stays resident.
#
#   scripts/symbol-order.sh                   write the file (callgrind; minutes)
#   scripts/symbol-order.sh --check BINARY    how many of its names BINARY still defines; fails
#                                             below 90 % (CI runs it on the release build)
#
# Runs a release build under valgrind's callgrind from start to SIGTERM against a throwaway
# PostgreSQL, oidc-provider-mock and an nginx upstream (bench/lib.sh): a login, cached proxied calls
# and /healthz under wrk, a call with a refused token, /openapi.yaml, and /metrics and /readyz on
# the admin listener. Functions that serve requests come first (those of the proxied call before
# the rest, by instructions), then those of start-up and login, then those of shutdown. A function
# the file does not name (new or renamed code) still links, after the ordered ones: a stale file
# only costs memory, never correctness. `--check` counts the names a build still has; run the
# script again when that count drops.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --check ]; then
    binary=${2:?usage: scripts/symbol-order.sh --check BINARY}
    total=$(sort -u scripts/symbol-order.txt | wc -l)
    # binutils' nm, or the Swift toolchain's llvm-nm.
    nm_tool=$(command -v nm || command -v llvm-nm) || { echo "symbol-order: no nm to read $binary" >&2; exit 1; }
    found=$(comm -12 <("$nm_tool" --defined-only "$binary" | awk '{ print $NF }' | sort -u) <(sort -u scripts/symbol-order.txt) | wc -l)
    percent=$((found * 100 / total))
    echo "symbol-order: $binary defines $found of the $total functions of scripts/symbol-order.txt ($percent %)"
    [ "$percent" -ge 90 ] || { echo "symbol-order: the file is stale: run scripts/symbol-order.sh" >&2; exit 1; }
    exit 0
fi
. bench/lib.sh
EXTRA_PACKAGES="nginx wrk valgrind" scripts/deps.sh

release_build tokengate
work=$(mktemp -d /tmp/tokengate-symbol-order.XXXXXX)
chmod 755 "$work"
pids=()
trap 'stop_bench "$work" 25832' EXIT
NGINX_PORT=18580 UPSTREAM_PORT=18581 TG_PORT=18590 MOCK_PORT=18591
export TOKENGATE_ADMIN_PORT=18592

bench_api_stack "$work" 25832
callgrind_binary "$work"

valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/run.cg" \
    "$work/tokengate" serve --config "$work/tokengate.yaml" >"$work/tokengate.log" 2>&1 &
tg_pid=$!
pids+=($tg_pid)
wait_for "http://127.0.0.1:$TG_PORT/readyz"
token=$(login_token $TG_PORT)
for _ in 1 2 3; do curl -s -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$TG_PORT/api/bench/hello"; done
callgrind_control --dump=start "$tg_pid" >/dev/null 2>&1
wrk -t1 -c8 -d3s -H "Authorization: Bearer $token" "http://127.0.0.1:$TG_PORT/api/bench/hello" >/dev/null
callgrind_control --dump=proxy "$tg_pid" >/dev/null 2>&1
wrk -t1 -c8 -d2s "http://127.0.0.1:$TG_PORT/healthz" >/dev/null
for path in /openapi.yaml /api/bench/hello; do curl -s -o /dev/null "http://127.0.0.1:$TG_PORT$path"; done
for path in /metrics /readyz; do curl -s -o /dev/null "http://127.0.0.1:$TOKENGATE_ADMIN_PORT$path"; done
curl -s -o /dev/null -H "Authorization: Bearer not-a-token" "http://127.0.0.1:$TG_PORT/api/bench/hello"
callgrind_control --dump=serve "$tg_pid" >/dev/null 2>&1
kill -TERM "$tg_pid"
wait "$tg_pid" || true

# Each dump names the functions that ran in it, with their instructions ("fn=(id) name", then
# cost lines; names are given once per file and referred to by id after).
python3 - "$work" scripts/symbol-order.txt <<'PY'
import collections, glob, os, re, sys
work, out = sys.argv[1], sys.argv[2]

def functions(path):
    names, objects, cost = {}, {}, collections.Counter()
    current, inside, after_call = None, False, False
    for line in open(path, errors='replace'):
        m = re.match(r'^(c?ob)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if m:
            if m.group(3):
                objects[m.group(2)] = m.group(3)
            if m.group(1) == 'ob':
                inside = objects[m.group(2)].endswith('/tokengate')
            continue
        m = re.match(r'^(c?fn)=\((\d+)\)(?: (.*))?$', line.rstrip('\n'))
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3).split("'")[0]
            if m.group(1) == 'fn':
                current = names[m.group(2)] if inside else None
                if current:
                    cost[current] += 0
            continue
        if line.startswith('calls='):
            after_call = True  # the next cost line is the call's inclusive cost, not the caller's own
            continue
        if current and re.match(r'^([+-]?\d|\*)', line):
            parts = line.split()
            if len(parts) >= 2 and not after_call:
                cost[current] += int(parts[1])
            after_call = False
    return cost

# The dumps in the order they were taken: start-up and login, the proxied call, the rest of
# serving, shutdown (written at exit).
dumps = sorted(glob.glob(os.path.join(work, 'run.cg*')), key=os.path.getmtime)
phase = {tag: functions(dump) for tag, dump in zip(('start', 'proxy', 'serve', 'stop'), dumps)}
ordered, seen = [], set()
for tag in ('proxy', 'serve', 'start', 'stop'):
    for name, _ in sorted(phase.get(tag, {}).items(), key=lambda item: -item[1]):
        if name not in seen and not name.startswith('0x') and not name.startswith('('):
            seen.add(name)
            ordered.append(name)
with open(out, 'w') as f:
    f.write('\n'.join(ordered) + '\n')
print(f'{out}: {len(ordered)} functions ({len(phase.get("proxy", {}))} run by the proxied call)')
PY
