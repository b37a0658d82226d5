# Shared by the bench scripts (sourced): wrk runs and their figures.

# release_build PRODUCT...: release builds of PRODUCTs as the container image builds them, Swift's
# runtime and Foundation linked in statically (scripts/image.sh); sets bindir.
RELEASE_FLAGS=(-c release --static-swift-stdlib --experimental-lto-mode=full)
release_build() {
    local product
    for product in "$@"; do swift build "${RELEASE_FLAGS[@]}" --product "$product" >/dev/null; done
    bindir=$(swift build "${RELEASE_FLAGS[@]}" --show-bin-path)
}

# tokengate_binary: sets bindir to TOKENGATE_BINARY's folder when it names a build (an older one,
# to compare; it must be named `tokengate`), else makes this tree's release build.
tokengate_binary() {
    if [ -n "${TOKENGATE_BINARY:-}" ]; then
        [ "$(basename "$TOKENGATE_BINARY")" = tokengate ] || { echo "bench: TOKENGATE_BINARY must be named tokengate" >&2; exit 1; }
        bindir=$(cd "$(dirname "$TOKENGATE_BINARY")" && pwd)
    else
        release_build tokengate
    fi
}

# wrappers_floor_binary: sets wrappers_binary to WRAPPERS_BINARY when it names a build (an older
# one, to compare), else to this tree's release build of tokengate-bench-server, whose /loop/ is
# the wrappers' floor: TokenGate's hop through TGHTTPServer and TGHTTPClient, nothing of its domain.
wrappers_floor_binary() {
    if [ -n "${WRAPPERS_BINARY:-}" ]; then
        wrappers_binary=$WRAPPERS_BINARY
    else
        release_build tokengate-bench-server
        wrappers_binary=$bindir/tokengate-bench-server
    fi
}

# start_wrappers_floor WORK PORT: the wrappers' floor on PORT (on SERVER_CPUS when set, one loop
# per core it may use; log in WORK/wrappers.log), sending the C floor's fields (floor_fields) to
# $UPSTREAM_PORT, once it answers; sets wrappers_pid (the caller stops it).
start_wrappers_floor() {
    # taskset and env exec the binary: $! is the server's pid.
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} env $(floor_fields 127.0.0.1:$TG_PORT) "$wrappers_binary" "$2" 127.0.0.1:$UPSTREAM_PORT \
        >"$1/wrappers.log" 2>&1 &
    wrappers_pid=$!
    wait_for "http://127.0.0.1:$2/plain"
}

# build_floor [LIBRARY...]: compiles the C floor (bench/floor/proxy_floor.c) to $floor, linked
# with libmicrohttpd, libcurl and pthreads and LIBRARY... (`-lmimalloc`: TokenGate's allocator).
floor="${TMPDIR:-/tmp}/tokengate-proxy-floor"
build_floor() { cc -O2 -o "$floor" bench/floor/proxy_floor.c -lmicrohttpd -lcurl -lpthread "$@"; }

# Pinning, for the scripts that set it: SERVER_CPUS for what serves (TokenGate, its database,
# the nginx reference and upstream), LOAD_CPUS for wrk (taskset lists). Unset: not pinned.
# on_server_cpus COMMAND...: COMMAND on SERVER_CPUS (its children inherit them).
on_server_cpus() { ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$@"; }

# wrk_run URL [WRK OPTIONS...] [-- SCRIPT ARGUMENTS...]: "req/s p50 p99 errors" of one run
# (latencies as wrk prints them); uses $connections, $duration and LOAD_CPUS. wrk prints
# "Requests/sec: N" and, with --latency, "50% 1.2ms".
wrk_run() {
    local url=$1 out rps p50 p99 errors options=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
    out=$(${LOAD_CPUS:+taskset -c "$LOAD_CPUS"} wrk -t2 -c"$connections" -d"${duration}s" --latency "${options[@]}" "$url" "$@")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    errors=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
    echo "$rps $p50 $p99 ${errors:-none}"
}

# ms LATENCY: wrk's "850.00us", "1.20ms" or "1.05s" in milliseconds.
ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) print v/1000; else if (v ~ /ms$/) print v+0; else if (v ~ /s$/) print v*1000; else print v }'; }

# median: of the numbers on standard input, one per line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# spread: "min-max" of the numbers on standard input, one per line.
spread() { sort -g | awk 'NR==1 {a=$1} END {print a"-"$1}'; }

# col FILE N: the median of column N of FILE.
col() { awk -v c="$2" '{ print $c }' "$1" | median; }

# The references send the upstream what TokenGate sends on a proxied call, with the same lengths
# (docs/proxy.md, "Headers"): a bearer token as long as the mock provider's (42 characters), the
# client's address, TokenGate's public scheme and host, and a request id that the answer echoes.
# PROXY_TO_BACKEND is the proxy_pass settings TokenGate's hop is compared with (nginx's own request
# id is 32 characters, TokenGate's 15); floor_fields PUBLIC_HOST prints the C floor's environment
# for the same fields (bench/floor/proxy_floor.c).
UPSTREAM_TOKEN=bench0upstream0token0of0forty0two0chars000
PROXY_KEEPALIVE='proxy_http_version 1.1; proxy_set_header Connection "";'
PROXY_TO_BACKEND="$PROXY_KEEPALIVE proxy_set_header Authorization \"Bearer $UPSTREAM_TOKEN\"; proxy_set_header X-Forwarded-For \$remote_addr; proxy_set_header X-Forwarded-Proto http; proxy_set_header X-Forwarded-Host \$http_host; proxy_set_header X-Request-ID \$request_id; add_header X-Request-ID \$request_id;"
floor_fields() { echo "PROXY_FLOOR_TOKEN=$UPSTREAM_TOKEN PROXY_FLOOR_PUBLIC_HOST=$1"; }
# bench/run.sh's `proxy` case compares nginx with the HTTP layer's own one-hop proxy
# (tokengate-bench-server /proxy), which sends a static token and nothing else: so does nginx there.
PROXY_STATIC_TOKEN="$PROXY_KEEPALIVE proxy_set_header Authorization \"Bearer upstream-token\";"

# reference_nginx WORK NGINX_PORT UPSTREAM_PORT LOCATIONS: starts the reference nginx (pid in
# WORK/nginx.pid): LOCATIONS served on NGINX_PORT, where `backend` is the JSON answer on
# UPSTREAM_PORT.
reference_nginx() {
    local work=$1 nginx_port=$2 upstream_port=$3 locations=$4
    cat >"$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    upstream backend { server 127.0.0.1:$upstream_port; keepalive 64; }
    server {
        listen 127.0.0.1:$nginx_port;
        $locations
    }
    server {
        listen 127.0.0.1:$upstream_port;
        location / { default_type application/json; return 200 '{"value":"hello, world!"}'; }
    }
}
NGINX
    on_server_cpus nginx -p "$work" -c "$work/nginx.conf" -g "daemon on;"
}

# The start-up the scripts that run a real `tokengate serve` share. They use $bindir and append
# the processes they start to the caller's `pids` array (which its cleanup kills).

# The admin listener (/metrics, the readiness detail) of every TokenGate a script starts binds any
# free port unless the script exported one (bench/dpop.sh reads /metrics): two instances on one
# machine (bench/ab.sh) never want the same port. An environment override, not a configuration
# key, so that a binary older than the admin listener (bench/ab.sh) ignores it.
export TOKENGATE_ADMIN_PORT=${TOKENGATE_ADMIN_PORT:-0}

# wait_for URL: until URL answers 2xx, for up to 10 s; else the script stops.
wait_for() {
    for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
    echo "bench: $1 did not come up" >&2
    exit 1
}

# bench_database WORK PORT: a throwaway PostgreSQL under WORK/pg on PORT with a database `bench`;
# prints that database's URL. (Stop it with `scripts/pg.sh stop WORK/pg PORT`.)
bench_database() {
    local admin_url psql
    admin_url=$(on_server_cpus scripts/pg.sh start "$1/pg" "$2")
    psql=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql | sort -V | tail -n 1)
    "$psql" "$admin_url" -qAt -c "CREATE DATABASE bench" >/dev/null
    echo "${admin_url%/*}/bench"
}

# start_provider WORK PORT: oidc-provider-mock on PORT (log in WORK/provider.log), once it answers.
start_provider() {
    python3 -W ignore -m oidc_provider_mock -H 127.0.0.1 -p "$2" >"$1/provider.log" 2>&1 &
    pids+=($!)
    wait_for "http://127.0.0.1:$2/.well-known/openid-configuration"
}

# bench_configuration FILE PORT DATABASE_URL MOCK_PORT SERVER_OPTIONS UPSTREAM...: a TokenGate
# configuration for the bench app and the mock provider. SERVER_OPTIONS are more `server:` keys
# (`key: value, ...`, may be empty); each UPSTREAM is one API's keys (`name: bench, base_url: ...`).
# `$bench_secret` is the encryption key when set (two instances on one database need the same),
# `$bench_pool_size` the database pool (4), `$bench_log` the `log:` keys (warnings, no access log).
bench_configuration() {
    local file=$1 port=$2 database_url=$3 mock_port=$4 options=$5 upstream
    local secret=${bench_secret:-$(openssl rand -base64 32)}
    shift 5
    cat >"$file" <<YAML
server: { host: 127.0.0.1, port: $port, login_rate_limit_per_minute: 0, callback_rate_limit_per_minute: 0, token_rate_limit_per_minute: 0${options:+, $options} }
database: { url: "$database_url", pool_size: ${bench_pool_size:-4} }
log: { ${bench_log:-level: warning, access_log: false} }
encryption: { current_key_id: k1, keys: [{ id: k1, secret: "$secret" }] }
clients: [{ client_id: bench-app, redirect_uris: ["com.example.app:/cb"] }]
providers: [{ name: mock, kind: oidc, issuer: "http://127.0.0.1:$mock_port", client_id: tokengate, client_secret: secret }]
upstreams:
YAML
    for upstream in "$@"; do echo "  - { $upstream }" >>"$file"; done
}

# bench_api_stack WORK PGPORT: a throwaway PostgreSQL, the nginx upstream ($UPSTREAM_PORT, nginx
# itself on $NGINX_PORT), oidc-provider-mock ($MOCK_PORT) and WORK/tokengate.yaml serving on
# $TG_PORT with one API, `bench`; sets database_url.
bench_api_stack() {
    local work=$1 pgport=$2
    database_url=$(bench_database "$work" "$pgport")
    reference_nginx "$work" $NGINX_PORT $UPSTREAM_PORT "location / { return 404; }"
    start_provider "$work" $MOCK_PORT
    bench_configuration "$work/tokengate.yaml" $TG_PORT "$database_url" $MOCK_PORT "" \
        "name: bench, base_url: \"http://127.0.0.1:$UPSTREAM_PORT\", provider: mock, max_connections: 64"
}

# callgrind_binary WORK: migrates the database of WORK/tokengate.yaml and copies the release
# binary to WORK/tokengate without its debug information, which callgrind cannot read (the
# symbol table is enough).
callgrind_binary() {
    local work=$1
    "$bindir/tokengate" migrate --config "$work/tokengate.yaml" >/dev/null
    cp "$bindir/tokengate" "$work/tokengate"
    strip --strip-debug "$work/tokengate"
}

# start_tokengate WORK PORT: migrates the database of WORK/tokengate.yaml and serves it on PORT
# (log in WORK/tg.log) once /readyz answers; sets tg_pid.
start_tokengate() {
    "$bindir/tokengate" migrate --config "$1/tokengate.yaml" >/dev/null
    # taskset execs the binary: $! is TokenGate's pid.
    ${SERVER_CPUS:+taskset -c "$SERVER_CPUS"} "$bindir/tokengate" serve --config "$1/tokengate.yaml" >"$1/tg.log" 2>&1 &
    tg_pid=$!
    pids+=($tg_pid)
    wait_for "http://127.0.0.1:$2/readyz"
}

# login_token PORT: logs `alice` in to the TokenGate on PORT as the app `bench-app` through the
# mock provider (scripts/mock_login.py); prints TokenGate's access token.
login_token() {
    python3 scripts/mock_login.py "http://127.0.0.1:$1" bench-app com.example.app:/cb alice \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])'
}

# stop_bench WORK PG_PORT: what a script's EXIT trap does: stops the processes in `pids`, an nginx
# started in WORK, the PostgreSQL of WORK/pg on PG_PORT, and removes WORK.
stop_bench() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -f "$1/nginx.pid" ] && kill "$(cat "$1/nginx.pid")" 2>/dev/null || true
    scripts/pg.sh stop "$1/pg" "$2" >/dev/null 2>&1 || true
    sleep 0.3
    rm -rf "$1"
}
