"""agentd as the sandbox gets it: one zipapp (`agentd.pyz`) built from the `bot.sandbox.agentd` package.

The archive holds the package as `agentd/` and a `__main__.py` that calls
`agentd.rpc:main`, so `python3 -I agentd.pyz WORKSPACE` runs it with nothing of
the harness on its path, on whatever Python (3.8+) the sandbox has. It is
written here with `zipfile` rather than `python -m zipapp`: fixed timestamps
make the same bytes on every build, and stored (uncompressed) entries need no
zlib in the sandbox's Python. local and bwrap run `agentd_file()`; docker copies
it into the egress proxy's directory, which it bind-mounts read-only; modal,
which copies files in, extracts `agentd_tar()`.
"""

from __future__ import annotations

import atexit
import functools
import io
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

from bot.core.files import write_atomic

PACKAGE = Path(__file__).with_name("agentd")
MAIN = b"import sys\n\nfrom agentd.rpc import main\n\nsys.exit(main())\n"
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


@functools.cache
def zipapp_bytes() -> bytes:
    """The zipapp: `__main__.py` and every module of the agentd package, in name order."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        entries = [("__main__.py", MAIN)]
        entries += [(f"agentd/{p.name}", p.read_bytes()) for p in sorted(PACKAGE.glob("*.py"))]
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o444 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


_dirs: list[Path] = []  # the private directory of this process, once made


def agentd_file() -> Path:
    """The zipapp as a host file, in a directory private to this process (removed at exit); written
    again, in a new directory if need be, when a temp cleaner of a long-running server removed it."""
    if not _dirs or not _dirs[-1].is_dir():
        _dirs.append(Path(tempfile.mkdtemp(prefix="decode-agentd-")))
        atexit.register(shutil.rmtree, _dirs[-1], True)
    path = _dirs[-1] / "agentd.pyz"
    if not path.is_file():
        write_atomic(path, zipapp_bytes(), 0o444)
    return path


def agentd_tar(inside: str, workspace: Path | None = None, workspace_inside: str = "/workspace") -> bytes:
    """A tar for extraction at `/`: the zipapp at `inside` (directories included) and, when given, the
    host `workspace` at `workspace_inside`, everything owned by root. For backends that copy files in."""
    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if workspace is not None:
            tar.add(str(workspace), arcname=workspace_inside.strip("/"), filter=owned_by_root)
        parts = inside.strip("/").split("/")
        for depth in range(1, len(parts)):
            info = tarfile.TarInfo("/".join(parts[:depth]))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        data = zipapp_bytes()
        info = tarfile.TarInfo("/".join(parts))
        info.size, info.mode = len(data), 0o444
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
