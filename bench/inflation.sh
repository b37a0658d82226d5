#!/usr/bin/env bash
# What extra user-space time costs a server that shares its cores with the load generator.
#
#   bench/inflation.sh [ROUNDS] [SPIN_NS...]      e.g. bench/inflation.sh 2 0 6000 12000
#
# Runs the C floor's GET /healthz (bench/floor/proxy_floor.c, two loops) with PROXY_FLOOR_SPIN_NS
# of pure user-space work added to every answer, under wrk -t2 -c64 on the same 2 cores, and
# prints per request: the floor's user and system CPU time and its context switches. On the
# development machine 6 µs of added user time raised the system time by 3-5 µs and the switches
# from 0.05 to 0.18 per request: wrk's wake-ups preempt a server that uses more CPU than wrk, and
# the kernel's work per request grows with it. TokenGate's `/healthz` shows the same pattern
# (docs/performance.md). Nothing leaves loopback; every process stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-2}
shift || true
spins=("${@:-0 6000 12000}")
read -r -a spins <<<"${spins[*]}"
EXTRA_PACKAGES="wrk" scripts/deps.sh
build_floor
port=18400
run() {
    local spin=$1 pid n u0 s0 u1 s1 c0 c1
    PROXY_FLOOR_SPIN_NS=$spin "$floor" $port http://127.0.0.1:9 2 >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
    wrk -t2 -c64 -d2s "http://127.0.0.1:$port/healthz" >/dev/null
    switches() { cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
    read -r u0 s0 <<<"$(awk '{print $14, $15}' /proc/$pid/stat)"
    c0=$(switches)
    n=$(wrk -t2 -c64 -d6s "http://127.0.0.1:$port/healthz" | awk '/requests in/ {print $1}')
    read -r u1 s1 <<<"$(awk '{print $14, $15}' /proc/$pid/stat)"
    c1=$(switches)
    kill "$pid"
    sleep 0.3
    awk -v spin="$spin" -v n="$n" -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "spin %6d ns  %7.0f req/s  user %6.2f us  system %6.2f us  total %6.2f us  switches/request %.3f\n", spin, n / 6, u / hz * 1e6 / n, s / hz * 1e6 / n, (u + s) / hz * 1e6 / n, c / n }'
}
for _ in $(seq "$rounds"); do
    for spin in "${spins[@]}"; do run "$spin"; done
done
