#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for development and tests.
#   scripts/pg.sh start DIR PORT   initdb (first time) and start; prints the database URL
#   scripts/pg.sh stop DIR         stop it (fast shutdown)
#   scripts/pg.sh url DIR PORT     print the URL only
# The server refuses to run as root, so as root it runs as the `postgres` user.
set -euo pipefail

cmd=${1:?usage: pg.sh start|stop|url DIR [PORT]}
dir=$(realpath -m "${2:?data directory}")
port=${3:-54329}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "pg.sh: PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url() { echo "postgresql://tokengate@127.0.0.1:$port/tokengate?sslmode=disable"; }

case "$cmd" in
start)
    # The server outlives this script: close descriptors inherited from the caller (a test
    # runner's pipes), or the daemon keeps them open and the caller waits forever.
    for fd in $(ls /proc/$$/fd); do
        [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null || true
    done
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    chmod 700 "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir.initdb.log" 2>&1 \
            || { cat "$dir.initdb.log" >&2; exit 1; }
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        as_owner "$bin/pg_ctl" -D "$dir" -w -t 60 -l "$dir/server.log" \
            -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c fsync=off -c max_connections=200" start >/dev/null \
            || { tail -n 30 "$dir/server.log" >&2; exit 1; }
    fi
    psql_() { "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
    [ "$(psql_ -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname='tokengate'")" = 1 ] \
        || psql_ -d postgres -c "CREATE ROLE tokengate LOGIN SUPERUSER"
    [ "$(psql_ -d postgres -c "SELECT 1 FROM pg_database WHERE datname='tokengate'")" = 1 ] \
        || psql_ -d postgres -c "CREATE DATABASE tokengate OWNER tokengate"
    url
    ;;
stop)
    if [ -f "$dir/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null || true; fi
    ;;
url) url ;;
*) echo "usage: pg.sh start|stop|url DIR [PORT]" >&2; exit 2 ;;
esac
