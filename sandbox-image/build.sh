#!/usr/bin/env bash
# Build the local sandbox base image for SANDBOX_MODE=docker without pulling anything:
# a Debian minbase root made by debootstrap, imported with `docker import`.
#
#   sandbox-image/build.sh [--force] [IMAGE]
#   sandbox-image/build.sh --app-base [--force] [IMAGE]
#
# IMAGE defaults to $DECODE_SANDBOX_IMAGE, then decode-sandbox:latest. The build is
# skipped when the image exists and its python3 can run agentd, unless --force.
# Needs root (debootstrap), debootstrap and a running Docker engine; SUITE and
# MIRROR override the Debian release and mirror. The image holds python3 with its
# full standard library (python3-minimal lacks json), git, ca-certificates, procps.
# --app-base builds instead the base of the app image (the Dockerfile's BASE,
# default decode-base:latest): python3 with venv, git, ca-certificates, bubblewrap.
set -euo pipefail

force=0
app_base=0
image=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --app-base) app_base=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
    *) image="$arg" ;;
  esac
done
suite="${SUITE:-bookworm}"
mirror="${MIRROR:-http://deb.debian.org/debian}"
if [ "$app_base" = 1 ]; then
  image="${image:-decode-base:latest}"
  title=decode-base
  packages="python3,python3-venv,git,ca-certificates,bubblewrap"
  probe='import json, sqlite3, ssl, venv, ensurepip, subprocess, sys; assert sys.version_info >= (3, 11)'
  check=(sh -c "python3 -c '$probe' && git --version && bwrap --version")
  lacking="lacks python3 with venv, git or bubblewrap"
  workdir=/
else
  image="${image:-${DECODE_SANDBOX_IMAGE:-decode-sandbox:latest}}"
  title=decode-sandbox
  packages="python3,git,ca-certificates,procps"
  probe='import json, select, subprocess'
  check=(python3 -c "$probe")
  lacking="its python3 cannot run agentd (python3-minimal only?)"
  workdir=/workspace
fi

if ! docker info >/dev/null 2>&1; then
  echo "build.sh: the Docker engine is not answering: start dockerd first" >&2
  exit 1
fi
if [ "$force" = 0 ] && docker image inspect "$image" >/dev/null 2>&1; then
  if docker run --rm --network none "$image" "${check[@]}" >/dev/null 2>&1; then
    echo "build.sh: $image exists; pass --force to rebuild"
    exit 0
  fi
  echo "build.sh: $image exists but $lacking: rebuilding"
fi
if [ "$(id -u)" != 0 ]; then
  echo "build.sh: debootstrap needs root: run it with sudo" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "build.sh: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }

rootfs="$(mktemp -d /tmp/decode-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
python3_version="$(chroot "$rootfs" python3 -c "$probe; import sys; print(sys.version.split()[0])")"
tar -C "$rootfs" -c . | docker import \
  -c 'CMD ["/bin/bash"]' \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  -c "WORKDIR $workdir" \
  -c "LABEL org.opencontainers.image.title=$title decode.python=$python3_version" \
  - "$image"
echo "build.sh: built $image (Debian $suite, python $python3_version)"
