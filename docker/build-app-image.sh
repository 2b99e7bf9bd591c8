#!/usr/bin/env bash
# Build the app image (the Dockerfile at the repository root) without network inside
# the build: what CI runs, and what works on a machine that cannot pull images.
#
#   docker/build-app-image.sh [--base IMAGE] [--tag TAG] [--no-wheelhouse]
#
# 1. The base (default decode-base:latest, a local Debian bookworm with python3,
#    python3-venv, git, ca-certificates and bubblewrap) is built by
#    `sandbox-image/build.sh --app-base` when it is missing (needs root and
#    debootstrap). Another --base is used as is (docker pulls it if it can).
# 2. The dependencies are made into wheels on this host with the project's
#    virtualenv (.venv, or $PYTHON) into build/wheelhouse/, which the Dockerfile
#    installs from with --no-index. Skipped when the wheelhouse was already made
#    from the same pyproject.toml and Python version, and when the base's Python
#    differs from the virtualenv's (the image then installs from the index, which
#    needs network); --no-wheelhouse skips it always.
# 3. `docker build --build-arg BASE=... -t TAG .` (default decode-bot:latest); the
#    layer cache makes a re-run with no change a matter of seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

base="decode-base:latest"
tag="decode-bot:latest"
wheelhouse=1
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base="${2:?--base needs an image}"; shift 2 ;;
    --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
    --no-wheelhouse) wheelhouse=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "build-app-image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
python="${PYTHON:-.venv/bin/python}"
say() { echo "build-app-image.sh: $*" >&2; }

if ! docker info >/dev/null 2>&1; then
  say "the Docker engine is not answering: start dockerd first"
  exit 1
fi

if ! docker image inspect "$base" >/dev/null 2>&1; then
  case "$base" in
    decode-base:*) sandbox-image/build.sh --app-base "$base" ;;
    *) say "$base is not here; docker build will try to pull it" ;;
  esac
fi

out=build/wheelhouse
if [ "$wheelhouse" = 1 ]; then
  [ -x "$python" ] || { say "no virtualenv at $python: run scripts/setup, or set PYTHON"; exit 1; }
  host_py="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  base_py="$(docker run --rm --network none --entrypoint python3 "$base" \
               -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
  if [ -z "$base_py" ]; then
    say "cannot run python3 in $base (not pulled yet?): no wheelhouse, the image installs from the index"
    wheelhouse=0
  elif [ "$host_py" != "$base_py" ]; then
    say "$base has Python $base_py, $python is $host_py: no wheelhouse, the image installs from the index"
    wheelhouse=0
  fi
fi
if [ "$wheelhouse" = 1 ]; then
  # What the wheels depend on: the requirements and the Python version. The package
  # itself is built inside the image, from the source in the context.
  inputs="$(sha256sum pyproject.toml | cut -d' ' -f1) $host_py"
  if [ "$(cat "$out/.inputs" 2>/dev/null)" != "$inputs" ]; then
    say "building the wheelhouse in $out with $python"
    rm -rf "$out"
    mkdir -p "$out"
    "$python" -c 'import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))
x = p["project"]["optional-dependencies"]  # the extras the Dockerfile installs
print("\n".join(p["project"]["dependencies"] + x["server"] + x["postgres"] + x["modal"]
                + p["build-system"]["requires"] + ["wheel"]))' > "$out/requirements.txt"
    "$python" -m pip wheel -q --disable-pip-version-check --wheel-dir "$out" -r "$out/requirements.txt"
    echo "$host_py" > "$out/PYTHON"
    echo "$inputs" > "$out/.inputs"
  else
    say "the wheelhouse in $out is up to date"
  fi
elif [ -d "$out" ]; then
  rm -f "$out/PYTHON" "$out/.inputs"  # so the Dockerfile does not try it
fi

say "docker build --build-arg BASE=$base -t $tag ."
set +e
docker build --build-arg "BASE=$base" -t "$tag" . 2>&1 | grep -v -e '^DEPRECATED: The legacy builder' \
  -e '^ *Install the buildx component' -e '^ *https://docs.docker.com/go/buildx/' -e 'IPv4 forwarding is disabled'
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { say "docker build failed (exit $status)"; exit "$status"; }
say "built $tag from $base ($(docker image inspect "$tag" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}'))"
