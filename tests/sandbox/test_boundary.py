"""The boundary answers for the backends: what each offers and what a host does for it, read off its
launcher class without starting anything; nothing outside bot/sandbox/ names a backend to decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.errors import ConfigError
from bot.sandbox import BACKENDS, ISOLATING, Capabilities, SandboxSpec, capabilities, offering, prepare_host


def test_every_backend_has_the_whole_launcher_protocol() -> None:
    for mode, launcher in BACKENDS.items():
        assert isinstance(launcher.capabilities, Capabilities), mode
        for member in ("prepare_host", "start", "death", "stopped", "blocked", "close"):
            assert callable(getattr(launcher, member, None)), f"the {mode} launcher has no {member}"


def test_capabilities_are_declared_by_each_backend() -> None:
    assert ISOLATING == ("bwrap", "docker", "modal"), "local is for trusted input only"
    assert offering("gpu") == ("modal",) and offering("image") == ("docker", "modal")
    assert offering("egress_policy") == ISOLATING and offering("pool") == ("docker", "modal")
    assert capabilities("docker") == BACKENDS["docker"].capabilities
    with pytest.raises(ConfigError, match="SANDBOX_MODE='vm' is not valid"):
        capabilities("vm")


def test_host_start_up_of_a_backend_without_leftovers_or_pools_does_nothing(tmp_path: Path) -> None:
    for mode in ("local", "bwrap"):
        prepare_host(mode, SandboxSpec(workspace=tmp_path))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match="SANDBOX_MODE='vm' is not valid"):
        prepare_host("vm", SandboxSpec(workspace=tmp_path))
