#!/bin/sh
# Builds, without any container registry, local stand-ins for the three images docker-compose.yml
# starts from: a Debian bookworm root filesystem from a Debian package mirror (debootstrap, run
# as root), imported as local/bookworm:minbase, and on it local/python:3.11-slim,
# local/postgres:15 and local/redis:7 (Dockerfiles beside this script). Then:
#   PYTHON_IMAGE=local/python:3.11-slim POSTGRES_IMAGE=local/postgres:15 \
#   REDIS_IMAGE=local/redis:7 SECRET_KEY=… docker compose up -d --build
# Environment: DEBIAN_MIRROR (default: debootstrap's own), EXTRA_CA_CERTS (a folder of *.crt
# files or one .crt, trusted by the Python image: a TLS-intercepting proxy's), REBUILD_ROOTFS=1
# to debootstrap again although local/bookworm:minbase exists.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "${REBUILD_ROOTFS:-0}" = 1 ] || ! docker image inspect local/bookworm:minbase >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    # shellcheck disable=SC2086  # the mirror is one optional word
    debootstrap --variant=minbase bookworm "$work/rootfs" ${DEBIAN_MIRROR:-}
    # No package lists or downloaded packages in the image: each Dockerfile updates its own.
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
    tar -C "$work/rootfs" -c . | docker import -c 'CMD ["bash"]' - local/bookworm:minbase
    rm -rf "$work/rootfs"
fi

cp "$here"/*.Dockerfile "$here"/*-entrypoint.sh "$work"/
mkdir "$work/extra-ca"
if [ -n "${EXTRA_CA_CERTS:-}" ]; then
    if [ -d "$EXTRA_CA_CERTS" ]; then
        cp "$EXTRA_CA_CERTS"/*.crt "$work/extra-ca/"
    else
        cp "$EXTRA_CA_CERTS" "$work/extra-ca/"
    fi
fi
docker build -t local/python:3.11-slim -f "$work/python.Dockerfile" "$work"
docker build -t local/postgres:15 -f "$work/postgres.Dockerfile" "$work"
docker build -t local/redis:7 -f "$work/redis.Dockerfile" "$work"
