"""The docker sandbox's image: how to get it from an installed decode-bot.

The default image (`decode-sandbox:latest`, DECODE_SANDBOX_IMAGE) is built on this machine, not pulled:
`image/build.sh` makes a Debian root with debootstrap and imports it (its header says what the image
holds). The script ships in the package, so `decode image build [--force] [IMAGE]` runs it from any
install, pipx's included; `sandbox-image/build.sh` in the repository links to it. Every error about a
missing image names that command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from bot.core.errors import ConfigError

BUILD_SCRIPT = Path(__file__).with_name("image") / "build.sh"


def build_command(image: str) -> str:
    """The command that builds `image` here, as one types it: debootstrap needs root, and `sudo decode` would not
    find a pipx install's `decode` on root's PATH."""
    return f"decode image build {image}" if os.geteuid() == 0 else f'sudo "$(command -v decode)" image build {image}'


def missing_image(image: str) -> ConfigError:
    """The error for a sandbox image the Docker engine does not have, with the commands that get it."""
    return ConfigError(f"the sandbox image {image} (DECODE_SANDBOX_IMAGE, or image: in .github/decode.yml) is not on "
                       f"this Docker engine: build it with `{build_command(image)}` (a few minutes), or "
                       f"docker pull {image} from a registry that has it")


def build(image: str, force: bool) -> int:
    """`decode image build`: run the shipped build script for `image`, its progress on this terminal; 0 when the
    image is there (built, or already good), 2 for something to fix first (named by the script), else 1."""
    bash = shutil.which("bash")
    if bash is None:
        raise ConfigError("decode image build needs bash on PATH")
    print(f"decode: building the sandbox image {image} (debootstrap, then docker import; a few minutes, its "
          "progress follows)", file=sys.stderr, flush=True)
    done = subprocess.run([bash, str(BUILD_SCRIPT), *(["--force"] if force else []), image])
    return done.returncode if done.returncode in (0, 2) else 1
