"""Pin the part of the installed `modal` client that bot/sandbox/modal.py calls.

Modal's servers are out of reach here, so the backend is tested against
tests/fakes/modal_double.py. These tests make sure both stay true to the real
package: every parameter we pass exists on the real callable, and every
parameter the double accepts exists on the real callable with the same kind.
An upgrade of modal that renames or drops one fails here, loudly.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes import modal_double

modal = pytest.importorskip("modal")
from modal.container_process import ContainerProcess  # noqa: E402
from modal.io_streams import StreamReader, StreamWriter  # noqa: E402

# name -> (real callable, double callable, the parameters bot/sandbox/modal.py passes)
USED: dict[str, tuple[Callable[..., Any], Callable[..., Any], set[str]]] = {
    "App.lookup": (modal.App.lookup, modal_double.App.lookup, {"name", "create_if_missing"}),
    "Image.from_registry": (modal.Image.from_registry, modal_double.Image.from_registry, {"tag", "add_python"}),
    "Image.apt_install": (modal.Image.apt_install, modal_double.Image.apt_install, {"packages"}),
    "Sandbox.create": (modal.Sandbox.create, modal_double.Sandbox.create,
                       {"args", "app", "image", "env", "timeout", "cpu", "memory", "gpu", "block_network",
                        "outbound_cidr_allowlist", "outbound_domain_allowlist"}),
    "Sandbox.exec": (modal.Sandbox.exec, modal_double.Sandbox.exec, {"args", "workdir", "text"}),
    "Sandbox.terminate": (modal.Sandbox.terminate, modal_double.Sandbox.terminate, set()),
    "Sandbox.snapshot_filesystem": (modal.Sandbox.snapshot_filesystem, modal_double.Sandbox.snapshot_filesystem,
                                    set()),
    "Sandbox.poll": (modal.Sandbox.poll, modal_double.Sandbox.poll, set()),
    "ContainerProcess.wait": (ContainerProcess.wait, modal_double.ContainerProcess.wait, set()),
    "ContainerProcess.poll": (ContainerProcess.poll, modal_double.ContainerProcess.poll, set()),
    "StreamWriter.write": (StreamWriter.write, modal_double.StreamWriter.write, {"data"}),
    "StreamWriter.write_eof": (StreamWriter.write_eof, modal_double.StreamWriter.write_eof, set()),
    "StreamWriter.drain": (StreamWriter.drain, modal_double.StreamWriter.drain, set()),
    "StreamReader.read": (StreamReader.read, modal_double.StreamReader.read, set()),
}


def test_the_installed_modal_is_the_one_pinned() -> None:
    assert modal.__version__.split(".")[0] == "1", "the double imitates modal 1.x; review it for a new major"


@pytest.mark.parametrize("name", sorted(USED))
def test_real_modal_takes_every_parameter_we_pass(name: str) -> None:
    real, _, passed = USED[name]
    params = inspect.signature(real).parameters
    assert passed <= set(params), f"modal.{name} lost {sorted(passed - set(params))}"


@pytest.mark.parametrize("name", sorted(USED))
def test_the_double_accepts_nothing_the_real_client_does_not(name: str) -> None:
    real, double, _ = USED[name]
    real_params = inspect.signature(real).parameters
    for pname, param in inspect.signature(double).parameters.items():
        if pname == "self":
            continue
        assert pname in real_params, f"the double's {name} takes {pname}, which modal's does not"
        assert param.kind == real_params[pname].kind, f"{name}({pname}) is {param.kind} in the double"


def test_process_and_stream_attributes_exist() -> None:
    for attr in ("stdin", "stdout", "stderr", "returncode", "wait", "poll"):
        assert hasattr(ContainerProcess, attr), attr
    assert hasattr(StreamReader, "__iter__")
    for attr in ("object_id", "exec", "terminate", "snapshot_filesystem", "poll", "create"):
        assert hasattr(modal.Sandbox, attr), attr


def test_stdin_buffer_limit_matches_the_double() -> None:
    import modal.io_streams

    from bot.sandbox.modal import CHUNK

    assert modal.io_streams.MAX_BUFFER_SIZE == modal_double.MAX_BUFFER_SIZE
    assert CHUNK < modal.io_streams.MAX_BUFFER_SIZE
