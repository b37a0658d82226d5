#!/usr/bin/env bash
# make dev's app side in Swift: the TokenGateClient library (docs/apps.md) signs USER (default
# alice) in against the running `make dev`, calls /auth/me and the API behind /api/graph with a
# DPoP-bound token, keeps a transfer code and logs out (Sources/tokengate-app-example).
#
#   scripts/app-example.sh [USER]        TG=http://127.0.0.1:8080 by default
#
# APP_EXAMPLE_BINARY=/path/to/tokengate-app-example runs that build instead of building it.
set -euo pipefail
cd "$(dirname "$0")/.."
TG=${TG:-http://127.0.0.1:8080}
binary=${APP_EXAMPLE_BINARY:-}
if [ -z "$binary" ]; then
    swift build --product tokengate-app-example >/dev/null
    binary="$(swift build --show-bin-path)/tokengate-app-example"
fi
exec "$binary" "$TG" "${1:-alice}"
