#!/usr/bin/env bash
# Build the local sandbox base image for SANDBOX_MODE=docker without pulling anything:
# a Debian minbase root made by debootstrap, imported with `docker import`.
#
#   sandbox-image/build.sh [--force] [IMAGE]     (installed: decode image build [--force] [IMAGE])
#   sandbox-image/build.sh --app-base [--force] [IMAGE]
#   sandbox-image/build.sh --print-mirror
#
# The script ships in the package (bot/sandbox/image/build.sh; sandbox-image/build.sh links to it), so
# `decode image build` runs it from an installed decode-bot too. Exit status 2: something to fix first (root,
# debootstrap, the Docker engine, apt's sources), one line naming it; 1: the build itself failed.
# IMAGE defaults to $DECODE_SANDBOX_IMAGE, then decode-sandbox:latest. The build is
# skipped when the image exists and carries the toolchain below (so an older image
# without pip is rebuilt), unless --force.
# Needs root (debootstrap), debootstrap and a running Docker engine; SUITE and
# MIRROR override the Debian release and mirror. The mirror defaults to the first
# `deb` source for SUITE that apt is configured with (sources.list, sources.list.d
# *.list and deb822 *.sources under $APT_ETC, default /etc/apt). The image holds python3 with its
# full standard library (python3-minimal lacks json), git, ca-certificates, procps, and what a
# typical repository's setup needs: pip and venv, a C toolchain (build-essential), curl,
# node and npm. Setup runs as a non-root uid there: pip and npm install into $HOME/.local.
# --app-base builds instead the base of the app image (the Dockerfile's BASE,
# default decode-base:latest): python3 with venv, git, ca-certificates, bubblewrap.
# Both images carry the C.UTF-8 locale (every sandboxed command runs with it) compiled into
# /usr/lib/locale/locale-archive: glibc then maps one file at each program's start instead of
# opening one per LC_* category (0.06-0.15 ms less a command in a container; docs/scale.md).
set -euo pipefail

force=0
app_base=0
print_mirror=0
image=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --app-base) app_base=1 ;;
    --print-mirror) print_mirror=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
    *) image="$arg" ;;
  esac
done
suite="${SUITE:-bookworm}"
archived="localedef --list-archive | grep -qx C.utf8"  # the image's C.UTF-8 is in the locale archive

# The URIs of the enabled `deb` sources for suite $1 in apt's configuration, in apt's order.
apt_mirror() {
  local etc="${APT_ETC:-/etc/apt}" files=() f
  [ -f "$etc/sources.list" ] && files+=("$etc/sources.list")
  for f in "$etc"/sources.list.d/*.list; do [ -f "$f" ] && files+=("$f"); done
  if [ "${#files[@]}" -gt 0 ]; then
    awk -v suite="$1" '
      /^[[:space:]]*deb[[:space:]]/ {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }' "${files[@]}"
  fi
  for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$1" 'BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; uris = ""; suites = ""; enabled = "yes"
        for (n = 1; n <= NF; n++) {
          line = $n
          if (line ~ /^#/) continue
          key = tolower(line); sub(/:.*/, "", key)
          value = line; sub(/^[^:]*:[[:space:]]*/, "", value)
          if (key == "types") types = value
          else if (key == "uris") uris = value
          else if (key == "suites") suites = value
          else if (key == "enabled") enabled = tolower(value)
        }
        if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ")) {
          split(uris, u, /[[:space:]]+/); print u[1]; exit
        }
      }' "$f"
  done
}
mirror="${MIRROR:-$(apt_mirror "$suite" | sed -n 1p)}"
if [ -z "$mirror" ]; then
  echo "build.sh: apt has no deb source for $suite in ${APT_ETC:-/etc/apt}: set MIRROR to a Debian mirror" >&2
  exit 2
fi
if [ "$print_mirror" = 1 ]; then
  echo "$mirror"
  exit 0
fi
if [ "$app_base" = 1 ]; then
  image="${image:-decode-base:latest}"
  title=decode-base
  packages="python3,python3-venv,git,ca-certificates,bubblewrap"
  probe='import json, sqlite3, ssl, venv, ensurepip, subprocess, sys; assert sys.version_info >= (3, 11)'
  check=(sh -c "python3 -c '$probe' && git --version && bwrap --version && $archived")
  lacking="lacks python3 with venv, git, bubblewrap or the locale archive"
  apt_packages=""
  workdir=/
else
  image="${image:-${DECODE_SANDBOX_IMAGE:-decode-sandbox:latest}}"
  title=decode-sandbox
  packages="python3,git,ca-certificates,procps,python3-pip,python3-venv,build-essential,curl,nodejs"
  # Installed with apt in the new root: debootstrap resolves Depends but not virtual packages, which
  # npm's dependencies need.
  apt_packages="npm"
  probe='import json, select, subprocess, ensurepip, venv'
  check=(sh -c "python3 -c '$probe' && python3 -m pip --version && cc --version && make --version && curl --version && node --version && npm --version && $archived")
  lacking="lacks python3 with pip and venv, a C toolchain, curl, node, npm or the locale archive"
  workdir=/workspace
fi

if ! docker info >/dev/null 2>&1; then
  echo "build.sh: the Docker engine is not answering: start dockerd first" >&2
  exit 2
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
  exit 2
fi
command -v debootstrap >/dev/null || { echo "build.sh: install debootstrap (apt-get install debootstrap)" >&2; exit 2; }

rootfs="$(mktemp -d /tmp/decode-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror"
if [ -n "$apt_packages" ]; then
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  apt_opts=(-o Acquire::Check-Valid-Until="$(apt-config dump Acquire::Check-Valid-Until --format '%v' 2>/dev/null || true)")
  [ "${apt_opts[1]}" = "Acquire::Check-Valid-Until=false" ] || apt_opts=()  # as the host's apt treats the mirror
  chroot "$rootfs" apt-get "${apt_opts[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends \
    $apt_packages >/dev/null
  chroot "$rootfs" apt-get clean
  : > "$rootfs/etc/resolv.conf"
fi
chroot "$rootfs" localedef --add-to-archive /usr/lib/locale/C.utf8 >/dev/null
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
python3_version="$(chroot "$rootfs" python3 -c "$probe; import sys; print(sys.version.split()[0])")"
tar -C "$rootfs" -c . | docker import \
  -c 'CMD ["/bin/bash"]' \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  -c "WORKDIR $workdir" \
  -c "LABEL org.opencontainers.image.title=$title decode.python=$python3_version" \
  - "$image"
echo "build.sh: built $image (Debian $suite, python $python3_version)"
