# The decode-bot GitHub App server: `decode serve` on port 8080, as user `decode`.
#
# With a registry and network, the default base works as is:
#     docker build -t decode-bot:latest .
# Offline (no pulls, no network in RUN steps; what CI does), docker/build-app-image.sh
# builds a local Debian base and a wheelhouse first, then runs
#     docker build --build-arg BASE=decode-base:latest -t decode-bot:latest .
# The dependencies come from build/wheelhouse/ when it holds wheels made for the
# base's Python version (build/wheelhouse/PYTHON), from the package index otherwise.
# See docs/deploy.md.
ARG BASE=python:3.12-slim-bookworm

FROM ${BASE} AS build
# Python images have venv built in; Debian's python3 needs python3-venv (the local base has it).
RUN python3 -m venv /opt/decode
COPY pyproject.toml build/wheelhouse* /tmp/wheels/
# Dependencies first, in their own layer: a source change does not reinstall them. The core and the
# server, postgres and modal extras (decode serve on SQLite or PostgreSQL, any SANDBOX_MODE); the same
# list as docker/build-app-image.sh's wheelhouse.
RUN set -eu; cd /tmp/wheels; \
    python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
x = p["optional-dependencies"]; print("\n".join(p["dependencies"] + x["server"] + x["postgres"] + x["modal"]))' \
      > requirements.txt; \
    python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' > base-python; \
    if [ -f PYTHON ] && cmp -s PYTHON base-python; then \
        echo "installing from the wheelhouse (offline)"; touch offline; \
    elif [ -f PYTHON ]; then \
        echo "the wheelhouse is for Python $(cat PYTHON), the base has $(cat base-python): using the index"; \
    fi; \
    if [ -f offline ]; then set -- --no-index --find-links /tmp/wheels; fi; \
    /opt/decode/bin/python -m pip install --no-cache-dir --disable-pip-version-check "$@" -r requirements.txt
COPY pyproject.toml README.md /src/
COPY bot /src/bot/
RUN set -eu; if [ -f /tmp/wheels/offline ]; then set -- --no-index --find-links /tmp/wheels; fi; \
    /opt/decode/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-deps "$@" /src; \
    /opt/decode/bin/decode --help >/dev/null

FROM ${BASE}
# git: the bot clones and pushes on this side; bubblewrap: SANDBOX_MODE=bwrap. Both are
# in the local base already; on another base they are installed (which needs network).
RUN set -eu; missing=""; \
    command -v git >/dev/null || missing="$missing git"; \
    command -v bwrap >/dev/null || missing="$missing bubblewrap"; \
    [ -e /etc/ssl/certs/ca-certificates.crt ] || missing="$missing ca-certificates"; \
    if [ -n "$missing" ]; then \
        apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing \
        && rm -rf /var/lib/apt/lists/*; \
    fi; \
    useradd --uid 10001 --user-group --create-home --home-dir /home/decode --shell /usr/sbin/nologin decode; \
    install -d -o decode -g decode -m 0750 /data
COPY --from=build /opt/decode /opt/decode
# SANDBOX_MODE=bwrap keeps the agent in a sandbox without the host's Docker socket; it
# needs `--security-opt seccomp=unconfined --security-opt apparmor=unconfined
# --security-opt systempaths=unconfined` on `docker run` (docs/deploy.md).
ENV PATH=/opt/decode/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    DECODE_DATA_DIR=/data SANDBOX_MODE=bwrap
VOLUME ["/data"]
USER decode
WORKDIR /home/decode
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
CMD ["decode", "serve", "--host", "0.0.0.0", "--port", "8080"]
