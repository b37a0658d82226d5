#!/usr/bin/env bash
# A throwaway PostgreSQL high-availability cluster on loopback: one etcd and two Patroni nodes
# (a primary and a streaming replica), for failover tests and bench/failover.sh.
#   scripts/patroni.sh start DIR [BASE_PORT] [--sync]   start (first time: bootstrap); prints the database URL
#   scripts/patroni.sh stop DIR                         stop everything, wait for it to be gone
#   scripts/patroni.sh install -                        install the Debian packages when missing
#   scripts/patroni.sh url DIR                          the multi-host URL (target_session_attrs=read-write)
#   scripts/patroni.sh status DIR                       patronictl list
#   scripts/patroni.sh leader DIR                       the leader's name (pg0 or pg1)
#   scripts/patroni.sh wait DIR [SECONDS]               until a writable leader and a streaming replica
#   scripts/patroni.sh switchover DIR                   planned switchover to the replica; prints seconds
#   scripts/patroni.sh kill-primary DIR                 SIGKILL the primary's postmaster; prints seconds
#                                                       until a node accepts writes, and which
#   scripts/patroni.sh kill-node DIR                    SIGKILL the primary's Patroni and postmaster (the
#                                                       node is lost); prints seconds until the other
#                                                       node accepts writes, then restarts the lost node
#                                                       and waits for it to stream as a replica
# Ports: etcd BASE (peer BASE+1), PostgreSQL BASE+2 and BASE+3, Patroni's REST API BASE+4 and
# BASE+5; BASE defaults to 55500. --sync bootstraps with synchronous_mode: true (a commit
# returns only once the replica has it; Patroni promotes only a synchronous replica).
# Timing for loopback: ttl 10, loop_wait 2, retry_timeout 4 (Patroni wants
# loop_wait + 2 × retry_timeout ≤ ttl), primary_start_timeout 0 (a crashed primary fails over
# at once instead of restarting in place when a replica can take over).
# PostgreSQL refuses to run as root, so as root Patroni runs as the `postgres` user.
# Needs the Debian packages patroni, etcd-server, etcd-client (installed when missing).
set -euo pipefail

cmd=${1:?usage: patroni.sh start|stop|url|status|leader|wait|switchover|kill-primary|kill-node DIR}
dir=$(realpath -m "${2:?cluster directory}")
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/postgres" ] || bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install_packages() {
    local missing=()
    for p in patroni etcd-server etcd-client; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return
    echo "patroni.sh: installing ${missing[*]}" >&2
    local sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    # Packages only: their services (etcd on :2379) are not started.
    local created=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod 755 /usr/sbin/policy-rc.d
        created=1
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ -z "$created" ] || $sudo rm -f /usr/sbin/policy-rc.d
}

base() { cat "$dir/base_port"; }
pg_port() { echo $(($(base) + 2 + ${1#pg})); }
url() {
    local b
    b=$(base)
    echo "postgresql://tokengate@127.0.0.1:$((b + 2)),127.0.0.1:$((b + 3))/tokengate?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
}
psql_() { local port=$1; shift; "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAtX "$@"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }'; }

# The node that accepts writes now (asked of PostgreSQL, not of Patroni), or nothing.
writable() {
    for node in pg0 pg1; do
        [ "$(PGCONNECT_TIMEOUT=1 psql_ "$(pg_port $node)" -c "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && { echo $node; return; }
    done
    return 0
}

other() { [ "$1" = pg0 ] && echo pg1 || echo pg0; }

leader() {
    as_owner patronictl -c "$dir/pg0.yml" list -f json 2>/dev/null \
        | python3 -c 'import json,sys; print(next((m["Member"] for m in json.load(sys.stdin) if m["Role"] == "Leader"), ""))'
}

# A writable leader whose replica streams from it (pg_stat_replication), within $1 seconds.
wait_healthy() {
    local limit=${1:-90} start
    start=$(now)
    while :; do
        local w
        w=$(writable)
        if [ -n "$w" ] && [ "$(PGCONNECT_TIMEOUT=1 psql_ "$(pg_port "$w")" -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null)" = 1 ]; then
            return 0
        fi
        if awk -v a="$start" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
            echo "patroni.sh: no writable leader with a streaming replica after ${limit}s" >&2
            as_owner patronictl -c "$dir/pg0.yml" list >&2 || true
            return 1
        fi
        sleep 0.2
    done
}

# Polls every 50 ms until `new` accepts writes; prints the seconds since `$2`.
wait_writable() {
    local node=$1 start=$2 limit=${3:-60}
    while [ "$(PGCONNECT_TIMEOUT=1 psql_ "$(pg_port "$node")" -c "SELECT pg_is_in_recovery()" 2>/dev/null)" != f ]; do
        alive "$node" || { echo "patroni.sh: Patroni $node exited" >&2; return 1; }
        if awk -v a="$start" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
            echo "patroni.sh: $node did not become writable within ${limit}s" >&2
            return 1
        fi
        sleep 0.05
    done
    elapsed "$start"
}

write_config() {
    local node=$1 n=${1#pg} b sync=$2
    b=$(base)
    mkdir -p "$dir/$node"
    cat >"$dir/$node.yml" <<EOF
scope: tokengate-$b
name: $node
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$((b + 4 + n))
  connect_address: 127.0.0.1:$((b + 4 + n))
etcd3:
  hosts: 127.0.0.1:$b
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    synchronous_mode: $sync
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 200
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: trust
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$((b + 2 + n))
  connect_address: 127.0.0.1:$((b + 2 + n))
  data_dir: $dir/$node/data
  bin_dir: $bin
  pgpass: $dir/$node/pgpass
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: $dir/$node
EOF
}

# Starts a process in a session of its own (it outlives this script); its pid goes to $1.pid.
spawn() {
    local name=$1
    shift
    setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
    echo $! >"$dir/$name.pid"
}

start_node() {
    local node=$1
    # setpriv execs Patroni in its own process (runuser would fork and wait), so the pid is
    # Patroni's and a SIGKILL of it is the loss of the node.
    if [ "$(id -u)" = 0 ]; then
        spawn "$node" env HOME=/var/lib/postgresql setpriv --reuid postgres --regid postgres --init-groups patroni "$dir/$node.yml"
    else
        spawn "$node" patroni "$dir/$node.yml"
    fi
}

alive() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }

postmaster_pid() { head -n 1 "$dir/$1/data/postmaster.pid" 2>/dev/null || true; }

case "$cmd" in
start)
    install_packages
    # The servers outlive this script: close descriptors inherited from the caller (a test
    # runner's pipes), or the daemons keep them open and the caller waits forever.
    for fd in $(ls /proc/$$/fd); do
        [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null || true
    done
    sync=false
    base_port=55500
    for arg in "${@:3}"; do
        case "$arg" in
        --sync) sync=true ;;
        *) base_port=$arg ;;
        esac
    done
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ -f "$dir/base_port" ] || echo "$base_port" >"$dir/base_port"
    as_owner test -x "$dir" || { echo "patroni.sh: the postgres user cannot enter $dir (chmod 755 its parents)" >&2; exit 1; }
    b=$(base)
    if ! alive etcd; then
        spawn etcd etcd --name tg --data-dir "$dir/etcd" \
            --listen-client-urls "http://127.0.0.1:$b" --advertise-client-urls "http://127.0.0.1:$b" \
            --listen-peer-urls "http://127.0.0.1:$((b + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((b + 1))" \
            --initial-cluster "tg=http://127.0.0.1:$((b + 1))" --listen-metrics-urls "http://127.0.0.1:$((b + 6))"
        for _ in $(seq 100); do
            ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$b" endpoint health >/dev/null 2>&1 && break
            sleep 0.1
        done
    fi
    for node in pg0 pg1; do
        [ -f "$dir/$node.yml" ] || write_config $node $sync
        [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$dir/$node"
        alive $node || start_node $node
        # pg0 bootstraps first, so the first leader is predictable.
        [ $node = pg0 ] && [ ! -f "$dir/pg1/data/PG_VERSION" ] && { wait_writable pg0 "$(now)" 60 >/dev/null || { tail -n 30 "$dir/pg0.log" >&2; exit 1; }; }
    done
    wait_healthy 120 || { tail -n 20 "$dir/pg0.log" "$dir/pg1.log" >&2; exit 1; }
    w=$(writable)
    p=$(pg_port "$w")
    [ "$(psql_ "$p" -c "SELECT 1 FROM pg_roles WHERE rolname='tokengate'")" = 1 ] \
        || psql_ "$p" -c "CREATE ROLE tokengate LOGIN SUPERUSER"
    [ "$(psql_ "$p" -c "SELECT 1 FROM pg_database WHERE datname='tokengate'")" = 1 ] \
        || psql_ "$p" -c "CREATE DATABASE tokengate OWNER tokengate"
    url
    ;;
stop)
    [ -d "$dir" ] || exit 0
    # Patroni stops its PostgreSQL on SIGTERM; then etcd. Anything left is killed.
    for node in pg0 pg1; do alive $node && kill -TERM "$(cat "$dir/$node.pid")" 2>/dev/null || true; done
    for _ in $(seq 150); do
        alive pg0 || alive pg1 || break
        sleep 0.1
    done
    for node in pg0 pg1; do
        alive $node && kill -KILL "$(cat "$dir/$node.pid")" 2>/dev/null || true
        pm=$(postmaster_pid $node)
        [ -n "$pm" ] && kill -0 "$pm" 2>/dev/null && as_owner "$bin/pg_ctl" -D "$dir/$node/data" -m immediate -w stop >/dev/null 2>&1 || true
    done
    alive etcd && kill -TERM "$(cat "$dir/etcd.pid")" 2>/dev/null || true
    for _ in $(seq 50); do
        alive etcd || break
        sleep 0.1
    done
    alive etcd && kill -KILL "$(cat "$dir/etcd.pid")" 2>/dev/null || true
    exit 0
    ;;
install) install_packages ;;
url) url ;;
status) as_owner patronictl -c "$dir/pg0.yml" list ;;
leader) leader ;;
wait) wait_healthy "${3:-90}" ;;
switchover)
    old=$(writable)
    [ -n "$old" ] || { echo "patroni.sh: no writable primary" >&2; exit 1; }
    new=$(other "$old")
    start=$(now)
    as_owner patronictl -c "$dir/pg0.yml" switchover --leader "$old" --candidate "$new" --force >"$dir/switchover.log" 2>&1 \
        || { cat "$dir/switchover.log" >&2; exit 1; }
    wait_writable "$new" "$start"
    ;;
kill-primary)
    old=$(writable)
    [ -n "$old" ] || { echo "patroni.sh: no writable primary" >&2; exit 1; }
    pm=$(postmaster_pid "$old")
    start=$(now)
    kill -KILL "$pm"
    # Patroni either fails over to the replica or, when it judges that the replica cannot take
    # over, restarts the primary in place: whichever node accepts writes first.
    while :; do
        w=$(writable)
        [ -n "$w" ] && break
        if awk -v a="$start" -v b="$(now)" 'BEGIN { exit !(b - a > 60) }'; then
            echo "patroni.sh: no node accepts writes 60s after the kill" >&2
            exit 1
        fi
        sleep 0.05
    done
    echo "$(elapsed "$start") $w"
    ;;
kill-node)
    old=$(writable)
    [ -n "$old" ] || { echo "patroni.sh: no writable primary" >&2; exit 1; }
    pm=$(postmaster_pid "$old")
    start=$(now)
    kill -KILL "$(cat "$dir/$old.pid")" "$pm"
    wait_writable "$(other "$old")" "$start" 90
    # The lost node comes back and rejoins as a replica of the new primary (pg_rewind).
    for _ in $(seq 50); do
        kill -0 "$pm" 2>/dev/null || break
        sleep 0.1
    done
    start_node "$old"
    ;;
*) echo "usage: patroni.sh start|stop|url|status|leader|wait|switchover|kill-primary|kill-node DIR" >&2; exit 2 ;;
esac
