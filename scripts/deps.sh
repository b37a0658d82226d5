#!/usr/bin/env bash
# Installs the Debian packages TokenGate builds, tests and runs with, when missing.
set -euo pipefail
packages=(pkg-config libmicrohttpd-dev libcurl4-openssl-dev libpq-dev libssl-dev
          postgresql postgresql-contrib curl ${EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
