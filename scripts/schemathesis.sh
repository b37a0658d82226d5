#!/usr/bin/env bash
# Property-based API tests: schemathesis generates requests from openapi.yaml and checks every
# answer of a real TokenGate against it (no 5xx, documented status, content type and schema).
#
#   scripts/schemathesis.sh DATABASE_ADMIN_URL
#
# DATABASE_ADMIN_URL is a PostgreSQL URL whose role may create databases (what `scripts/pg.sh
# start` prints). The script creates a fresh database there, starts the real OpenID provider
# `oidc-provider-mock` and `tokengate serve` on free loopback ports, logs in once through the
# provider to get a bearer token, runs schemathesis, and stops everything it started and drops
# the database on exit. Environment:
#   TOKENGATE_BIN             the binary (default .build/debug/tokengate, relative to the repository)
#   SCHEMATHESIS_MAX_EXAMPLES test cases per operation and phase (default 30)
#   SCHEMATHESIS_MAX_TIME     seconds of testing in all (default 60; fuzzing repeats until spent)
# Artifacts (server and provider logs, JUnit report) stay in $SCHEMATHESIS_ARTIFACTS when set.
set -euo pipefail

admin_url=${1:?usage: scripts/schemathesis.sh DATABASE_ADMIN_URL}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TOKENGATE_BIN:-.build/debug/tokengate}
[[ $bin = /* ]] || bin=$root/$bin
max_examples=${SCHEMATHESIS_MAX_EXAMPLES:-30}
max_time=${SCHEMATHESIS_MAX_TIME:-60}
[ -x "$bin" ] || { echo "schemathesis.sh: $bin not found (swift build first)" >&2; exit 1; }
python3 -c "import schemathesis, oidc_provider_mock" 2>/dev/null \
    || { echo "schemathesis.sh: schemathesis or oidc-provider-mock missing (scripts/deps.sh)" >&2; exit 1; }
psql=$(command -v psql || ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)

work=$(mktemp -d /tmp/tokengate-schemathesis.XXXXXX)
database=tokengate_schemathesis_$$
mock_pid= server_pid= created=

stop() {  # stop PID: SIGTERM, SIGKILL after 5 s
    local pid=$1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local status=$?
    stop "$server_pid"
    stop "$mock_pid"
    if [ -n "$created" ]; then
        "$psql" "$admin_url" -qAt -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null 2>&1 || true
    fi
    if [ -n "${SCHEMATHESIS_ARTIFACTS:-}" ]; then
        mkdir -p "$SCHEMATHESIS_ARTIFACTS" && cp -r "$work"/. "$SCHEMATHESIS_ARTIFACTS"/ || true
    elif [ "$status" != 0 ]; then
        for log in "$work"/tokengate.log "$work"/provider.log; do
            [ -s "$log" ] && { echo "--- last lines of $(basename "$log")" >&2; tail -n 20 "$log" >&2; }
        done
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_for URL SECONDS [PID]: until URL answers 200 (a dead PID ends the wait early).
wait_for() {
    local url=$1 deadline=$((SECONDS + $2)) pid=${3:-}
    until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url")" = 200 ]; do
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        [ $SECONDS -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# A fresh database on the given server.
"$psql" "$admin_url" -v ON_ERROR_STOP=1 -qAt -c "CREATE DATABASE $database" >/dev/null
created=1
database_url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' \
    "$admin_url" "$database")

# The OpenID provider (it derives its issuer from the request's host).
mock_port=$(free_port)
issuer=http://127.0.0.1:$mock_port
python3 -W ignore -m oidc_provider_mock -H 127.0.0.1 -p "$mock_port" >"$work/provider.log" 2>&1 &
mock_pid=$!
wait_for "$issuer/.well-known/openid-configuration" 20 "$mock_pid" \
    || { echo "schemathesis.sh: oidc-provider-mock did not start" >&2; exit 1; }

# TokenGate.
port=$(free_port)
base=http://127.0.0.1:$port
cat >"$work/tokengate.yaml" <<EOF
server:
  host: 127.0.0.1
  port: $port
  login_rate_limit_per_minute: 0
  callback_rate_limit_per_minute: 0
  token_rate_limit_per_minute: 0
  drain_timeout_seconds: 2
# The admin listener (/metrics, the readiness detail) is not in openapi.yaml: any free port.
admin:
  port: 0
log:
  level: info
encryption:
  current_key_id: k1
  keys:
    - id: k1
      secret: "$(openssl rand -base64 32)"
clients:
  - client_id: demo-app
    redirect_uris: [com.example.app:/oauth2redirect]
providers:
  - { name: mock, kind: oidc, issuer: "$issuer", client_id: tokengate, client_secret: secret, shared_signals: true }
EOF
export TOKENGATE_DATABASE_URL=$database_url
"$bin" migrate --config "$work/tokengate.yaml" >"$work/migrate.log" 2>&1 \
    || { cat "$work/migrate.log" >&2; exit 1; }
"$bin" serve --config "$work/tokengate.yaml" >"$work/tokengate.log" 2>&1 &
server_pid=$!
wait_for "$base/healthz" 20 "$server_pid" || { echo "schemathesis.sh: tokengate serve did not start" >&2; exit 1; }

# Ready means the provider's metadata loaded too (the loopback provider is reached over plain
# http, as the configuration validator allows for loopback hosts only).
wait_for "$base/readyz" 20 "$server_pid" \
    || { echo "schemathesis.sh: TokenGate is not ready: $(curl -s --max-time 2 "$base/readyz")" >&2; exit 1; }
bearer=()
{
    # One real login through the provider: the browser's steps and the app's, as curl would do them.
    tokens=$(python3 "$root/scripts/mock_login.py" "$base" demo-app com.example.app:/oauth2redirect alice) \
        || { echo "schemathesis.sh: the login through oidc-provider-mock failed" >&2; exit 1; }
    access_token=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["access_token"])' "$tokens")
    bearer=(--header "Authorization: Bearer $access_token")
}

# Logout and account removal end the bearer token's session: they run last, on their own, so the
# other operations see a live session. `timeout` bounds each run should schemathesis overrun.
schemathesis() {
    local seconds=$1 name=$2
    shift 2
    # From the scratch folder: schemathesis and hypothesis leave caches in the working directory.
    # The hooks keep generated heads clear of the connection memory's edge (scripts/schemathesis_hooks.py).
    (cd "$work" && SCHEMATHESIS_HOOKS="$root/scripts/schemathesis_hooks.py" \
        timeout --kill-after=5 $((seconds + 30)) python3 -m schemathesis.cli run "$root/openapi.yaml" \
        --url "$base" \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
        --max-examples "$max_examples" --max-time "$seconds" \
        --workers 2 --max-redirects 0 --request-timeout 10 \
        --generation-database none --no-color \
        --report junit --report-junit-path "$work/$name.junit.xml" \
        ${bearer[@]+"${bearer[@]}"} "$@")
}
status=0
schemathesis $((max_time * 3 / 4)) main --exclude-operation-id logout --exclude-operation-id removeAccount \
    || status=$?
schemathesis $((max_time / 4)) signout --include-operation-id logout --include-operation-id removeAccount || status=$?
exit "$status"
