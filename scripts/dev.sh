#!/usr/bin/env bash
# `make dev`: TokenGate with everything it needs, on loopback, until Ctrl-C.
#
#   scripts/dev.sh            (ports: TOKENGATE_DEV_PORT 8080, TOKENGATE_DEV_ADMIN_PORT 9090, MOCK 8081,
#                              API 8082, PG 54329)
#
# Starts a throwaway PostgreSQL under .data/ (kept between runs), migrates it, starts the
# development OpenID provider (oidc-provider-mock from PyPI, the one the tests use, with a route
# that signs back-channel logout tokens: scripts/dev_provider.py) and a small
# Graph-shaped API (scripts/dev_api.py), writes .data/tokengate.yaml pointing TokenGate at them,
# runs TokenGate (its admin listener, /metrics and the readiness detail, on its own port), and prints
# the curl commands of scripts/walkthrough.sh. Ctrl-C stops it all.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-$(pwd)/.data}
tg_port=${TOKENGATE_DEV_PORT:-8080}
admin_port=${TOKENGATE_DEV_ADMIN_PORT:-9090}
mock_port=${MOCK_PORT:-8081}
api_port=${API_PORT:-8082}
pg_port=${DEV_PG_PORT:-54329}
binary=${TOKENGATE_BINARY:-.build/debug/tokengate}
mkdir -p "$data"

pids=()
stop() {
    trap - INT TERM EXIT
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    scripts/pg.sh stop "$data/pg" "$pg_port" >/dev/null 2>&1 || true
    echo "dev: stopped"
}
trap stop INT TERM EXIT
wait_for() {
    for _ in $(seq 150); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
    echo "dev: $1 did not come up" >&2
    exit 1
}

url=$(scripts/pg.sh start "$data/pg" "$pg_port")
echo "dev: PostgreSQL $url (data in $data/pg)"
python3 -W ignore scripts/dev_provider.py 127.0.0.1 "$mock_port" >"$data/provider.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$mock_port/.well-known/openid-configuration"
python3 scripts/dev_api.py "$api_port" "http://127.0.0.1:$mock_port" >"$data/api.log" 2>&1 &
pids+=($!)

# One key for the data at rest, kept with the database so restarts can read what is stored.
[ -s "$data/dev-key" ] || (umask 077 && openssl rand -base64 32 >"$data/dev-key")
cat >"$data/tokengate.yaml" <<YAML
# Written by scripts/dev.sh for \`make dev\`; every run rewrites it.
server: { host: 127.0.0.1, port: $tg_port, public_base_url: "http://127.0.0.1:$tg_port" }
admin: { host: 127.0.0.1, port: $admin_port }
database: { url: "$url" }
log: { level: info, access_log: true }
encryption: { current_key_id: dev, keys: [{ id: dev, secret: "$(cat "$data/dev-key")" }] }
clients:
  - { client_id: dev-app, redirect_uris: ["com.example.dev:/oauth"], dpop: allowed }
providers:
  - { name: dev, kind: oidc, issuer: "http://127.0.0.1:$mock_port", client_id: tokengate-dev, client_secret: dev-secret,
      scopes: [openid, profile, email, offline_access] }
upstreams:
  - { name: graph, base_url: "http://127.0.0.1:$api_port", provider: dev, path_prefixes: ["/me"], rewrite_links: true }
YAML
"$binary" migrate --config "$data/tokengate.yaml"
"$binary" serve --config "$data/tokengate.yaml" &
pids+=($!)
wait_for "http://127.0.0.1:$tg_port/readyz"
wait_for "http://127.0.0.1:$admin_port/readyz"

cat <<TEXT

TokenGate is running on http://127.0.0.1:$tg_port
  development provider  http://127.0.0.1:$mock_port (log in as anyone: its form posts sub=<user>)
  sample API            http://127.0.0.1:$api_port, proxied at /api/graph/…
  admin listener        http://127.0.0.1:$admin_port: /metrics, /readyz naming each check
                        (curl http://127.0.0.1:$admin_port/metrics; the public port has neither)
  configuration         $data/tokengate.yaml

Walk the whole flow in another terminal (or run it: bash scripts/walkthrough.sh):

$(sed -n '/^# --- walkthrough ---$/,$p' scripts/walkthrough.sh | tail -n +2 | sed "s|http://127.0.0.1:8080|http://127.0.0.1:$tg_port|g")

The same as an app does it in Swift, with the TokenGateClient library (docs/apps.md):
  TG=http://127.0.0.1:$tg_port bash scripts/app-example.sh

Back-channel logout (the user signs out at the provider, which tells TokenGate):
  TG=http://127.0.0.1:$tg_port IDP=http://127.0.0.1:$mock_port bash scripts/backchannel-logout.sh

Ctrl-C stops TokenGate, the provider, the API and PostgreSQL.
TEXT
wait "${pids[-1]}"
