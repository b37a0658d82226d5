#!/usr/bin/env bash
# TokenGate's container image, built and run with Podman (no daemon, no registry):
#
#   scripts/image.sh context release binary on this (Debian 12) host + Debian root filesystem
#                            (deploy/container/rootfs.sh) in .build/image/context, the build
#                            context of deploy/container/Containerfile (for `docker build` too)
#   scripts/image.sh build   context + `podman build`, tagged $IMAGE (tokengate:local)
#   scripts/image.sh smoke   runs $IMAGE as CI checks it (below)
#   scripts/image.sh test    build and smoke in a throwaway Podman storage under /tmp, removed
#                            afterwards with everything else it started (`make image-test`, CI)
#
# The smoke run checks that every library the binary links resolves inside the image (ld.so
# --list), that the image runs as 10001:10001, then against a throwaway PostgreSQL
# (scripts/pg.sh), oidc-provider-mock and the sample API of `make dev` (scripts/dev_api.py):
# `tokengate migrate`, then `tokengate serve` in a container with a read-only root filesystem and
# no writable tmpfs, no capabilities and no new privileges, on the host network bound to
# 127.0.0.1 only; /healthz and /readyz; the whole login walkthrough of `make dev`
# (scripts/walkthrough.sh: login, the provider's form, callback, token, /auth/me, an API call,
# refresh, transfer code, logout); then SIGTERM (`podman stop`) must end it with exit code 0.
#
# Runs as root (mmdebstrap and Podman here run rootful). Podman runs with runc: crun refuses a
# host whose cgroups are v1 with a v2 hierarchy that has controllers ("cgroups in hybrid mode not
# supported"). Containers get the caller's own file and process limits: Podman's defaults
# (nofile 1048576, nproc at the kernel's maximum) are above them, and raising a hard limit needs
# CAP_SYS_RESOURCE, which a sandboxed root may not have ("error setting rlimit").
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-}
image=${IMAGE:-tokengate:local}
pg_port=${IMAGE_PG_PORT:-54420}
provider_port=${IMAGE_PROVIDER_PORT:-18481}
api_port=${IMAGE_API_PORT:-18482}
tg_port=${IMAGE_TOKENGATE_PORT:-18480}
admin_port=${IMAGE_ADMIN_PORT:-18483}
context=.build/image/context

say() { echo "image: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap and Podman run rootful here): sudo $0 $*"

# podman with its options: `"${podman[@]}" …`, also under timeout.
podman=()
use_podman() {
    podman=(podman --cgroup-manager cgroupfs --events-backend file --runtime runc)
    if [ -n "${IMAGE_STORE:-}" ]; then
        podman+=(--root "$IMAGE_STORE/root" --runroot "$IMAGE_STORE/run" --tmpdir "$IMAGE_STORE/tmp")
    fi
}

deps() {
    EXTRA_PACKAGES="podman runc mmdebstrap ${EXTRA_PACKAGES:-}" scripts/deps.sh
}

stage_context() {
    # The binary links the host's libraries; the image has Debian 12's.
    grep -qx 'VERSION_CODENAME=bookworm' /etc/os-release \
        || die "the image holds Debian 12 (bookworm) libraries: build it on a Debian 12 host"
    say "release build (swift build -c release --product tokengate --static-swift-stdlib --experimental-lto-mode=full)"
    timeout 3600 swift build -c release --product tokengate --static-swift-stdlib --experimental-lto-mode=full
    local binary
    binary=$(swift build -c release --show-bin-path)/tokengate
    rm -rf "$context" && mkdir -p "$context"
    # Without its DWARF (16 MB); the symbol table stays, for the names in crash backtraces.
    strip --strip-debug -o "$context/tokengate" "$binary"
    chmod 0755 "$context/tokengate"
    say "root filesystem from Debian packages (deploy/container/rootfs.sh)"
    timeout 900 deploy/container/rootfs.sh "$context/rootfs.tar"
}

build() {
    stage_context
    say "podman build -f deploy/container/Containerfile -t $image $context"
    timeout 600 "${podman[@]}" build --quiet -f deploy/container/Containerfile -t "$image" "$context" >/dev/null
    say "built $image: $("${podman[@]}" image inspect --format '{{.Size}}' "$image" | numfmt --to=si) ($("${podman[@]}" image inspect --format '{{.Id}}' "$image" | cut -c1-12))"
}

# What smoke starts, stopped by its trap (globals: the trap runs after smoke has returned).
smoke_dir=
pids=()
containers=()
# shellcheck disable=SC2317  # called by the trap
stop_smoke() {
    for c in "${containers[@]}"; do "${podman[@]}" rm --force --time 0 "$c" >/dev/null 2>&1 || true; done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; done
    if [ -n "$smoke_dir" ]; then
        scripts/pg.sh stop "$smoke_dir/pg" >/dev/null 2>&1 || true
        rm -rf "$smoke_dir"
    fi
}

smoke() {
    smoke_dir=$(mktemp -d /tmp/tokengate-image-smoke.XXXXXX)
    local dir=$smoke_dir
    chmod 755 "$dir"
    wait_for() { # URL WHAT
        for _ in $(seq 300); do curl -sf -o /dev/null --max-time 2 "$1" && return 0; sleep 0.1; done
        say "$2 did not answer $1 within 30 s"
        return 1
    }
    # Every run: a read-only root filesystem without Podman's writable tmpfs on /tmp, /var/tmp and
    # /run (as Kubernetes' readOnlyRootFilesystem), no capabilities, no new privileges, the
    # caller's limits, the host's network.
    local run=(run --read-only --read-only-tmpfs=false --cap-drop=all --security-opt=no-new-privileges
        --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=4096:4096" --network=host)

    say "the image: user, libraries"
    local user
    user=$("${podman[@]}" image inspect --format '{{.Config.User}}' "$image")
    [ "$user" = 10001:10001 ] || die "the image runs as '$user', not 10001:10001"
    local libraries
    libraries=$(timeout 60 "${podman[@]}" "${run[@]}" --rm --entrypoint /lib64/ld-linux-x86-64.so.2 "$image" --list /usr/local/bin/tokengate)
    echo "  ${libraries//$'\n'/$'\n'  }" >&2
    ! echo "$libraries" | grep -q "not found" || die "a library the binary links is missing from the image"
    for library in libmicrohttpd.so.12 libcurl.so.4 libpq.so.5 libcrypto.so.3 libmimalloc.so.2; do
        echo "$libraries" | grep -q "$library => /" || die "the binary does not load $library from the image"
    done
    timeout 60 "${podman[@]}" "${run[@]}" --rm "$image" version >&2

    say "PostgreSQL on 127.0.0.1:$pg_port, oidc-provider-mock on :$provider_port, the sample API on :$api_port"
    local url
    url=$(scripts/pg.sh start "$dir/pg" "$pg_port")
    python3 -W ignore -m oidc_provider_mock -H 127.0.0.1 -p "$provider_port" >"$dir/provider.log" 2>&1 &
    pids+=($!)
    wait_for "http://127.0.0.1:$provider_port/.well-known/openid-configuration" "oidc-provider-mock" \
        || { cat "$dir/provider.log" >&2; exit 1; }
    python3 scripts/dev_api.py "$api_port" "http://127.0.0.1:$provider_port" >"$dir/api.log" 2>&1 &
    pids+=($!)

    # The configuration as deployments ship it: a mounted read-only file, secrets as files in a
    # read-only directory and one from the environment.
    mkdir -p "$dir/etc/secrets"
    printf %s "$url" >"$dir/etc/secrets/database-url"
    openssl rand -base64 32 | tr -d '\n' >"$dir/etc/secrets/key-k1"
    chmod 644 "$dir/etc/secrets/"*
    cat >"$dir/etc/tokengate.yaml" <<YAML
server: { host: 0.0.0.0, port: 8080, public_base_url: "http://127.0.0.1:$tg_port" }
database: { url: { file: /etc/tokengate/secrets/database-url } }
log: { level: info, access_log: true }
encryption: { current_key_id: k1, keys: [{ id: k1, secret: { file: /etc/tokengate/secrets/key-k1 } }] }
clients:
  - { client_id: dev-app, redirect_uris: ["com.example.dev:/oauth"] }
providers:
  - { name: dev, kind: oidc, issuer: "http://127.0.0.1:$provider_port", client_id: tokengate-dev,
      client_secret: { env: IDP_CLIENT_SECRET }, scopes: [openid, profile, email, offline_access] }
upstreams:
  - { name: graph, base_url: "http://127.0.0.1:$api_port", provider: dev, path_prefixes: ["/me"], rewrite_links: true }
YAML
    local mounts=(-v "$dir/etc/tokengate.yaml:/etc/tokengate/tokengate.yaml:ro" -v "$dir/etc/secrets:/etc/tokengate/secrets:ro"
        -e IDP_CLIENT_SECRET=dev-secret)

    say "tokengate migrate"
    timeout 120 "${podman[@]}" "${run[@]}" --rm "${mounts[@]}" "$image" migrate --config /etc/tokengate/tokengate.yaml >&2

    say "tokengate serve on 127.0.0.1:$tg_port"
    local name=tokengate-smoke-$$
    containers+=("$name")
    # The image listens on 0.0.0.0:8080 and 0.0.0.0:9090 (its ENV); here only loopback, on free ports.
    timeout 60 "${podman[@]}" "${run[@]}" --detach --name "$name" "${mounts[@]}" \
        -e TOKENGATE_SERVER_HOST=127.0.0.1 -e "TOKENGATE_SERVER_PORT=$tg_port" \
        -e TOKENGATE_ADMIN_HOST=127.0.0.1 -e "TOKENGATE_ADMIN_PORT=$admin_port" "$image" >/dev/null
    wait_for "http://127.0.0.1:$tg_port/healthz" "tokengate serve" || { "${podman[@]}" logs "$name" >&2; exit 1; }
    local pid
    pid=$("${podman[@]}" inspect --format '{{.State.Pid}}' "$name")
    [ "$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")" = 10001 ] || die "tokengate serve does not run as uid 10001"
    [ "$("${podman[@]}" inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$name")" = true ] || die "the root filesystem is writable"
    local listening
    listening=$(ss -Htlnp "sport = :$tg_port" | awk '{ print $4 }' | sort -u)
    [ "$listening" = "127.0.0.1:$tg_port" ] || die "tokengate listens on '$listening', not 127.0.0.1:$tg_port only"
    listening=$(ss -Htlnp "sport = :$admin_port" | awk '{ print $4 }' | sort -u)
    [ "$listening" = "127.0.0.1:$admin_port" ] || die "the admin listener is on '$listening', not 127.0.0.1:$admin_port only"
    # Metrics on the admin listener only; its /readyz names each check, the public one does not.
    local metrics
    metrics=$(curl -s -o "$dir/metrics" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$admin_port/metrics")
    [ "$metrics" = 200 ] && grep -q '^tokengate_' "$dir/metrics" || die "the admin listener's /metrics answered $metrics"
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$tg_port/metrics")" = 404 ] \
        || die "the public port serves /metrics"
    curl -s --max-time 10 "http://127.0.0.1:$admin_port/readyz" | grep -q '"database":"ok"' || die "the admin /readyz names no database check"
    say "admin listener on 127.0.0.1:$admin_port: /metrics and the detailed /readyz; the public port answers /metrics 404"
    for path in /healthz /readyz; do
        local status
        status=$(curl -s -o "$dir/body" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$tg_port$path")
        say "GET $path: $status $(head -c 200 "$dir/body")"
        [ "$status" = 200 ] || { "${podman[@]}" logs "$name" >&2; die "$path answered $status"; }
    done

    say "the walkthrough of make dev (scripts/walkthrough.sh) through the container"
    if ! TG="http://127.0.0.1:$tg_port" timeout 120 bash scripts/walkthrough.sh >"$dir/walk.out" 2>&1; then
        cat "$dir/walk.out" >&2
        "${podman[@]}" logs --tail 50 "$name" >&2
        die "the walkthrough failed"
    fi
    sed 's/^/  /' "$dir/walk.out" >&2
    grep -q '"subject":"alice"' "$dir/walk.out" || die "/auth/me did not answer alice"
    grep -qx 'old device after transfer: 401' "$dir/walk.out" || die "the transfer code did not end the old device's session"
    [ "$(tail -n 1 "$dir/walk.out")" = "after logout: 401" ] || die "the token still works after logout"

    say "SIGTERM (podman stop): drain, exit 0"
    local started=$SECONDS
    timeout 60 "${podman[@]}" stop --time 30 "$name" >/dev/null
    local code
    code=$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")
    "${podman[@]}" logs "$name" 2>&1 | tail -n 3 | sed 's/^/  /' >&2
    [ "$code" = 0 ] || die "tokengate serve exited $code after SIGTERM"
    "${podman[@]}" logs "$name" >"$dir/serve.log" 2>&1
    grep '"message":"shutting down"' "$dir/serve.log" | grep -q '"signal":"SIGTERM"' || die "no 'shutting down' on SIGTERM in the log"
    grep -q '"message":"stopped"' "$dir/serve.log" || die "no 'stopped' in the log"
    say "stopped with exit code 0 in $((SECONDS - started)) s"
    say "smoke passed: $image"
}

case "$command" in
context)
    deps
    stage_context
    ;;
build)
    deps
    use_podman
    build
    ;;
smoke)
    deps
    use_podman
    trap stop_smoke EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    smoke
    ;;
test)
    deps
    IMAGE_STORE=$(mktemp -d /tmp/tokengate-image-store.XXXXXX)
    use_podman
    # shellcheck disable=SC2317  # called by the trap
    remove_store() {
        stop_smoke
        "${podman[@]}" rm --all --force --time 0 >/dev/null 2>&1 || true
        "${podman[@]}" rmi --all --force >/dev/null 2>&1 || true
        # The overlay driver keeps its own folder mounted (private) until nothing uses it.
        findmnt -rn -o TARGET | grep "^$IMAGE_STORE/" | sort -r | xargs -r umount 2>/dev/null || true
        rm -rf "$IMAGE_STORE"
    }
    trap remove_store EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    started=$SECONDS
    build
    built=$SECONDS
    smoke
    say "build $((built - started)) s, smoke $((SECONDS - built)) s"
    ;;
*)
    echo "usage: scripts/image.sh context|build|smoke|test" >&2
    exit 2
    ;;
esac
