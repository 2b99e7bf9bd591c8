"""The Docker engine as the docker backend reaches it: the CLI on PATH with the client's variables, whether the
engine answers, and the id of an image on it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from bot.core.errors import ConfigError, SandboxError
from bot.sandbox.images import missing_image

CLIENT_VARS = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
               "DOCKER_TLS_VERIFY", "DOCKER_API_VERSION", "XDG_RUNTIME_DIR")
ANSWER_S = 30  # how long `check_engine` waits for the engine: a stuck one is as good as down


def check_engine(docker: str = "docker", client_env: Mapping[str, str] | None = None) -> None:
    """A ConfigError naming what to fix unless the engine answers (`docker version`): a run that cannot start
    a sandbox stops before any clone, as `decode check` does."""
    found, env = engine(docker, client_env)
    try:
        res = subprocess.run([found, "version", "--format", "{{.Server.Version}}"], env=env, capture_output=True,
                             text=True, timeout=ANSWER_S)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"the Docker engine did not answer in {ANSWER_S}s: check dockerd, or DOCKER_HOST") from None
    if res.returncode != 0 or not res.stdout.strip():
        raise ConfigError(not_answering((res.stderr.strip().splitlines() or ["no answer"])[-1]))


def image_id(image: str, docker: str = "docker", client_env: Mapping[str, str] | None = None) -> str:
    """The id of `image` on the engine; `missing_image`'s error when the engine lacks it, a SandboxError when
    the engine does not answer."""
    found, env = engine(docker, client_env)
    try:
        res = subprocess.run([found, "image", "inspect", "--format", "{{.Id}}", image], env=env, capture_output=True,
                             text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise SandboxError("docker image inspect did not answer in 120s: is the engine healthy?") from None
    if res.returncode == 0 and res.stdout.strip():
        return res.stdout.strip()
    if "no such image" in res.stderr.lower():
        raise missing_image(image)
    raise SandboxError(not_answering(res.stderr.strip()), stderr=res.stderr)


def not_answering(said: str) -> str:
    """The line for an engine that did not answer, with what the docker CLI `said`."""
    return f"the Docker engine is not answering ({said}): start dockerd or check DOCKER_HOST"


def engine(docker: str, client_env: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
    """The docker CLI's path and the client variables it runs with (`CLIENT_VARS` of `client_env`, else of
    this process's environment); ConfigError without the CLI."""
    found = shutil.which(docker)
    if found is None:
        raise ConfigError("SANDBOX_MODE=docker needs the docker CLI on PATH: install Docker")
    env = os.environ if client_env is None else client_env
    return found, {k: env[k] for k in CLIENT_VARS if k in env}
