#!/usr/bin/env bash
# The root filesystem of TokenGate's container image, made from Debian 12 (bookworm) packages
# with mmdebstrap, as a tarball that deploy/container/Containerfile adds to an empty image:
#
#   deploy/container/rootfs.sh OUT.tar      (as root; scripts/image.sh build runs it)
#
# Only the packages of the shared libraries the release binary links (`ldd`: libmicrohttpd12,
# libcurl4, libpq5, libssl3, libmimalloc2.0, and libstdc++6 for Swift's runtime), ca-certificates
# and tzdata, and the packages they depend on, are extracted (mmdebstrap's `extract` variant): no
# shell, no package manager, no maintainer scripts. What those scripts would have done is done here instead, from outside: the CA bundle
# (as update-ca-certificates writes it), ld.so's cache, UTC as the time zone. The user and group
# tokengate (10001) are the only ones besides root and nobody. Documentation, manual pages,
# translations and apt's lists are left out; /usr/share/doc keeps each package's copyright.
# /var/lib/dpkg/status lists the packages, so image scanners see what is inside.
#
# The packages come from the Debian archive in the host's apt sources (TOKENGATE_IMAGE_SOURCES,
# default /etc/apt/sources.list.d/debian.sources; mmdebstrap's default mirrors without it): the
# binary is built on a Debian 12 host against the same libraries.
set -euo pipefail

if [ "${1:-}" = --finish ]; then
    # mmdebstrap's extract hook: $2 is the extracted tree, its downloaded .debs still in
    # var/cache/apt/archives.
    root=${2:?}
    # The package database, from each .deb's control fields.
    : >"$root/var/lib/dpkg/status"
    for deb in "$root"/var/cache/apt/archives/*.deb; do
        dpkg-deb --field "$deb" | awk 'NR == 1 { print; print "Status: install ok installed"; next } { print }' >>"$root/var/lib/dpkg/status"
        echo >>"$root/var/lib/dpkg/status"
    done
    # The CA bundle libcurl and OpenSSL read (/etc/ssl/certs/ca-certificates.crt), its per-certificate
    # links and their hash names, as ca-certificates' postinst (update-ca-certificates) makes them.
    certs=$root/etc/ssl/certs
    : >"$root/etc/ca-certificates.conf"
    : >"$root/etc/ssl/bundle.new"
    (cd "$root/usr/share/ca-certificates" && find . -name '*.crt' | sed 's|^\./||' | LC_ALL=C sort) | while read -r cert; do
        echo "$cert" >>"$root/etc/ca-certificates.conf"
        ln -s "/usr/share/ca-certificates/$cert" "$certs/$(basename "$cert" .crt | sed -e 's/ /_/g' -e 's/[()]/=/g' -e 's/,/_/g').pem"
        # shellcheck disable=SC1003  # sed's `$a\`: end the file with a newline, as update-ca-certificates does
        sed -e '$a\' "$root/usr/share/ca-certificates/$cert" >>"$root/etc/ssl/bundle.new"
    done
    [ -s "$root/etc/ssl/bundle.new" ] || { echo "rootfs: no CA certificates extracted" >&2; exit 1; }
    chroot "$root" /usr/bin/openssl rehash /etc/ssl/certs
    mv "$root/etc/ssl/bundle.new" "$certs/ca-certificates.crt"
    # UTC, and ld.so's cache of the libraries.
    ln -sf /usr/share/zoneinfo/Etc/UTC "$root/etc/localtime"
    echo Etc/UTC >"$root/etc/timezone"
    echo 'include /etc/ld.so.conf.d/*.conf' >"$root/etc/ld.so.conf"
    ldconfig -r "$root"
    # Users, groups and name lookup from files (the container's /etc/hosts), then DNS.
    printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' \
        'tokengate:x:10001:10001:TokenGate:/nonexistent:/usr/sbin/nologin' \
        'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' >"$root/etc/passwd"
    printf '%s\n' 'root:x:0:' 'tokengate:x:10001:' 'nogroup:x:65534:' >"$root/etc/group"
    printf '%s\n' 'passwd: files' 'group: files' 'shadow: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
    # What the runtime supplies (/etc/hosts, /etc/hostname, /etc/resolv.conf are mounted by
    # Podman, Docker and Kubernetes), what only an installer reads, and what nobody reads.
    rm -rf "$root"/etc/{apt,dpkg,fstab,hostname,resolv.conf} "$root"/var/{cache,log} "$root"/var/lib/apt \
        "$root"/usr/share/{man,info,locale,lintian,bash-completion,pixmaps,bug}
    find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    mkdir -p "$root"/{run,var/tmp} "$root/etc/tokengate"
    chmod 1777 "$root/tmp" "$root/var/tmp"
    exit 0
fi

out=${1:?usage: deploy/container/rootfs.sh OUT.tar}
command -v mmdebstrap >/dev/null || { echo "rootfs: mmdebstrap is missing (apt-get install mmdebstrap)" >&2; exit 1; }
sources=${TOKENGATE_IMAGE_SOURCES:-/etc/apt/sources.list.d/debian.sources}
mirror=()
[ -f "$sources" ] && mirror=("$sources")
self=$(realpath "$0")
# --skip=output/dev: no device nodes in the tarball (the container runtime provides /dev).
# --skip=cleanup/…: the hook has removed apt's and mmdebstrap's files already.
mmdebstrap --quiet --variant=extract --skip=output/dev,cleanup/apt,cleanup/mmdebstrap \
    --include=libmicrohttpd12,libcurl4,libpq5,libssl3,libmimalloc2.0,libstdc++6,ca-certificates,tzdata \
    --extract-hook="\"$self\" --finish \"\$1\"" \
    bookworm "$out" "${mirror[@]}"
