"""agentd: the one persistent process that runs inside every sandbox.

It is started once per sandbox (`python3 agentd.py WORKSPACE`) and serves
requests as JSON lines on stdin, one JSON line answer each on stdout, so a tool
call costs a pipe round trip instead of a `docker exec`. It runs wherever the
sandbox's Python does, so it uses the standard library only and stays
compatible with Python 3.8.

Requests: {"id", "op", ...}; answers: {"id", "ok": true, ...} or
{"id", "ok": false, "error": "..."}. Ops: ping, exec, read, write, glob, grep,
check (what the hand-back would leave out, and why), export (the changes as a
patch, in a file read back with export_read, so no answer line is large). Every path is resolved inside the sandbox and refused when it lands
outside the workspace (through "..", an absolute path or a symlink).

Egress: bwrap and docker sandboxes have no network interface but loopback.
When `DECODE_EGRESS_SOCKET` names the harness's egress proxy (a unix socket
bound in from the host, see bot/sandbox/egress.py), agentd relays
127.0.0.1:PORT to it and sets the proxy variables every command inherits.
"""

import base64
import fnmatch
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

MAX_LIST = 1000
GREP_MAX_FILE = 2 * 1024 * 1024
# Untracked build droppings never worth a commit, even when the repo's .gitignore forgets them.
EXPORT_EXCLUDES = ("__pycache__/", "*.py[co]", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", ".tox/",
                   "node_modules/", ".DS_Store")
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".tox", ".mypy_cache"}


class Refused(Exception):
    """A request the sandbox will not carry out; the message goes to the model."""


class Workspace:
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.export_path = None  # the last export's patch file, until read to the end

    def resolve(self, path):
        """The real path of `path` (relative to the root), refused if outside it."""
        if not isinstance(path, str) or not path:
            raise Refused("a path is required")
        joined = os.path.join(self.root, path)
        real = os.path.realpath(joined)
        if real != self.root and not real.startswith(self.root + os.sep):
            raise Refused(
                "refused: %r resolves outside the workspace %s; use a path inside it"
                % (path, self.root)
            )
        return real

    def rel(self, real):
        return os.path.relpath(real, self.root)


class OutputCap:
    """Keeps the first and last `cap // 2` bytes of a stream and counts the rest."""

    def __init__(self, cap):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk):
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - self.half
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self):
        out = bytes(self.head)
        if self.dropped:
            out += b"\n[... %d bytes dropped by the sandbox ...]\n" % self.dropped
        return (out + bytes(self.tail)).decode("utf-8", "replace")


def op_exec(ws, req):
    timeout = float(req.get("timeout") or 120)
    cap = int(req.get("cap") or 1024 * 1024)
    env = dict(os.environ)
    env.update(req.get("env") or {})
    started = time.monotonic()
    proc = subprocess.Popen(
        ["/bin/bash", "-c", req["command"]],
        cwd=ws.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    out = OutputCap(cap)
    fd = proc.stdout.fileno()
    deadline = started + timeout
    timed_out = False
    exited_at = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.2:
            break  # background children keep the pipe open; stop waiting for them
        if now >= deadline:
            timed_out = True
            break
        wait = min(deadline - now, 0.05 if exited_at else 1.0)
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:  # the pipe closed; the command may not be reaped yet
                timed_out = not wait_exit(proc, deadline)
                break
            out.feed(chunk)
    kill_group(proc.pid)
    proc.wait()
    kill_group(proc.pid, until_gone=True)
    kill_descendants()
    drain(fd, out)
    proc.stdout.close()
    return {
        "exit_code": None if timed_out else proc.returncode,
        "output": out.text(),
        "timed_out": timed_out,
        "dropped_bytes": out.dropped,
        "duration": time.monotonic() - started,
    }


def wait_exit(proc, deadline):
    """Wait for `proc` to exit until `deadline`; True when it did.

    A pidfd wakes us the moment it exits (Linux 5.3+, Python 3.9+);
    `Popen.wait(timeout)` polls with sleeps and would add a millisecond to
    every command.
    """
    if proc.poll() is not None:
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        select.select([pidfd], [], [], max(deadline - time.monotonic(), 0))
    finally:
        os.close(pidfd)
    return proc.poll() is not None


def kill_group(pgid, until_gone=False):
    """SIGKILL the process group; with `until_gone`, repeat until it is empty.

    One signal can miss a child forked while it is delivered (a fork bomb), so
    the second call keeps killing and reaping (agentd is the subreaper of what
    its commands leave behind) until no member is left or two seconds pass.
    Only call it with `until_gone` after the command's own process was waited
    for, since reaping takes any child.
    """
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not until_gone or time.monotonic() > deadline:
            return
        reap()
        time.sleep(0.001)


def reap():
    """Collect every exited orphan that was re-parented to agentd; True while children remain."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_descendants(timeout=2.0):
    """SIGKILL every process agentd's commands left behind, until none is left, and reap them.

    A process group is not enough: a command can leave its group (`setsid`,
    a double fork) and outlive its call. agentd is a child subreaper, so every
    living descendant has an ancestor chain that ends at one of agentd's
    children; when agentd has no child left, it has no descendant left, and a
    command that left nothing behind costs one `waitpid`. Otherwise the ppid
    chains under /proc name them all; killing repeats, since a process can fork
    between the scan and its signal, and its orphans come back to agentd.
    """
    deadline = time.monotonic() + timeout
    me = os.getpid()
    while reap():
        delivered = False
        for pid in descendants(me):
            try:
                os.kill(pid, signal.SIGKILL)
                delivered = True
            except OSError:  # gone already, or not ours to kill (a setuid program)
                pass
        if not delivered or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def descendants(root):
    """The pids whose parent chain under /proc leads to `root` (processes only, not threads)."""
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open("/proc/%s/stat" % name, os.O_RDONLY)
            try:
                stat = os.read(fd, 1024)
            finally:
                os.close(fd)
            parents[int(name)] = int(stat[stat.rindex(b")") + 2:].split(None, 2)[1])
        except (OSError, ValueError):
            continue  # exited while we looked
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def become_subreaper():
    """Make orphaned descendants children of agentd (Linux), so their zombies are reaped at once.

    Without it they go to the sandbox's pid 1, which on some hosts never reaps.
    """
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (ImportError, OSError, AttributeError):
        pass


def drain(fd, out):
    while True:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        out.feed(chunk)


def op_read(ws, req):
    real = ws.resolve(req["path"])
    if os.path.isdir(real):
        raise Refused("%s is a directory; use glob to list it" % req["path"])
    try:
        with open(real, "rb") as f:
            data = f.read(int(req.get("max_bytes") or 10 * 1024 * 1024))
    except FileNotFoundError:
        raise Refused("%s does not exist" % req["path"])
    return {"data": base64.b64encode(data).decode()}


def op_write(ws, req):
    real = ws.resolve(req["path"])
    if os.path.isdir(real):
        raise Refused("%s is a directory" % req["path"])
    os.makedirs(os.path.dirname(real), exist_ok=True)
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    return {"path": ws.rel(real)}


def walk(ws, base):
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield os.path.join(dirpath, name)


def op_glob(ws, req):
    base = ws.resolve(req.get("path") or ".")
    pattern = req["pattern"]
    regex = glob_regex(pattern)
    found = []
    for full in walk(ws, base):
        rel = os.path.relpath(full, base)
        if regex.match(rel):
            found.append(full)
    found.sort(key=lambda p: -safe_mtime(p))
    return {"paths": [ws.rel(p) for p in found[:MAX_LIST]], "total": len(found)}


def glob_regex(pattern):
    """`**` spans directories, `*` and `?` stay within one path segment."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def safe_mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def op_grep(ws, req):
    try:
        regex = re.compile(req["pattern"])
    except re.error as e:
        raise Refused("invalid regular expression %r: %s" % (req["pattern"], e))
    base = ws.resolve(req.get("path") or ".")
    file_glob = req.get("glob")
    files = [base] if os.path.isfile(base) else walk(ws, base)
    matches, total = [], 0
    for full in files:
        if file_glob and not fnmatch.fnmatch(os.path.basename(full), file_glob):
            continue
        try:
            if os.path.getsize(full) > GREP_MAX_FILE:
                continue
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < MAX_LIST:
                    matches.append("%s:%d:%s" % (ws.rel(full), number, line[:500]))
    return {"matches": matches, "total": total}


LINK_HOPS = 40
READ_CHUNK = 4 * 1024 * 1024


class Stage(object):
    """The workspace's resulting tree in a throwaway index against commit `base`.

    The git dir borrows the workspace's objects, so nothing the agent planted in
    the workspace's .git (config, hooks, fsmonitor, filters) is read or run.
    Some entries keep their base version in the index and are named in `left`
    (path -> why) when the agent changed them: files over `max_file_bytes`
    (never added nor hashed), submodules (`submodule_changes`: decode-bot
    commits to this repository only) and Git LFS files (`lfs_changes`: the
    hand-back does not carry LFS content).
    """

    def __init__(self, ws, base, max_file_bytes=None):
        if not isinstance(base, str) or not re.match(r"^[0-9a-f]{40}([0-9a-f]{24})?$", base):
            raise Refused("base must be a full commit id")
        self.ws, self.base = ws, base
        self.tmp = tempfile.mkdtemp(prefix="decode-export-")
        gitdir = os.path.join(self.tmp, "git")
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.tmp,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_DIR": gitdir,
            "GIT_WORK_TREE": ws.root,
            "GIT_INDEX_FILE": os.path.join(self.tmp, "index"),
            "GIT_TERMINAL_PROMPT": "0",
        }
        try:
            init_env = dict((k, v) for k, v in self.env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE"))
            subprocess.run(["git", "init", "-q", "--bare", gitdir], env=init_env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            with open(os.path.join(gitdir, "objects", "info", "alternates"), "w") as f:
                f.write(os.path.join(ws.root, ".git", "objects") + "\n")
            with open(os.path.join(gitdir, "info", "exclude"), "w") as f:
                f.write("\n".join(EXPORT_EXCLUDES) + "\n")
            self.git("read-tree", base)
            tracked = dict((path, meta.split()) for meta, path in zip_z(self.git("ls-files", "-s", "-z")))
            self.left = {}
            keep = set()  # paths whose base entry stays in the index, whatever the worktree holds
            self.left.update(submodule_changes(ws.root, tracked, keep))
            self.left.update(self.lfs_changes(tracked, keep))
            self.big = self.oversized(max_file_bytes, tracked, keep) if max_file_bytes else {}
            self.left.update(self.big)
            spec = [":(exclude,literal)" + p for p in sorted(keep | set(self.big))]
            self.git("add", "-A", "--", ".", *spec)
            self.left.update(self.new_lfs_files())
        except BaseException:
            self.close()
            raise

    def git(self, *args, **kw):
        res = subprocess.run(
            ["git", "-c", "core.hooksPath=" + os.devnull, "-c", "core.fsmonitor=false"] + list(args),
            env=self.env, cwd=self.ws.root, stdout=kw.get("stdout", subprocess.PIPE), stderr=subprocess.PIPE,
            input=kw.get("input"),
        )
        if res.returncode != 0:
            raise Refused("git %s failed: %s" % (args[0], res.stderr.decode("utf-8", "replace").strip()))
        return res.stdout

    def oversized(self, limit, tracked, keep):
        """Changed or new files over `limit` bytes -> why they are left out (tracked files are compared first)."""
        untracked = split_z(self.git("ls-files", "-o", "-z", "--exclude-standard"))
        big, submodules = {}, tuple(p + "/" for p in keep if tracked.get(p, ("",))[0] == "160000")
        for path in [p for p in tracked if p not in keep] + untracked:
            if submodules and path.startswith(submodules):
                continue
            try:
                st = os.lstat(os.path.join(self.ws.root, path))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size <= limit:
                continue
            if path in tracked:
                same = self.git("hash-object", "--no-filters", "--", path).strip().decode() == tracked[path][1]
                if same:
                    continue
            big[path] = "%.0f MB, over the %.0f MB limit for one file (DECODE_MAX_FILE_MB)" % (
                st.st_size / 1048576.0, limit / 1048576.0)
        return big

    def lfs_changes(self, tracked, keep):
        """Files whose base blob is a Git LFS pointer: kept as in the base, and named when the agent changed them.

        A file is unchanged when it still holds the pointer, or the content the
        pointer names (its size and sha256), as a host with git-lfs checks out.
        """
        small = [(path, meta) for path, meta in tracked.items() if meta[0] in ("100644", "100755")]
        if not small:
            return {}
        sizes = self.git("cat-file", "--batch-check", input="".join(m[1] + "\n" for _, m in small).encode())
        candidates = [(path, meta) for (path, meta), line in zip(small, sizes.decode().splitlines())
                      if int(line.split(" ")[2]) <= LFS_POINTER_MAX]
        found = {}
        blobs = read_blobs(self, [meta[1] for _, meta in candidates])
        for path, meta in candidates:
            pointer = lfs_pointer(blobs[meta[1]])
            if pointer is None:
                continue
            keep.add(path)
            if not lfs_unchanged(os.path.join(self.ws.root, path), blobs[meta[1]], pointer, meta[0]):
                found[path] = LFS_REASON
        return found

    def new_lfs_files(self):
        """New files that .gitattributes sends to Git LFS: taken out of the index and named (no LFS content is carried)."""
        raw = split_z(self.git("diff-index", "--cached", "-z", "--name-status", "--no-renames", self.base))
        added = [path for status, path in zip(raw[0::2], raw[1::2]) if status == "A"]
        if not added:
            return {}
        out = split_z(self.git("check-attr", "--cached", "-z", "--stdin", "filter",
                               input=b"".join(os.fsencode(p) + b"\0" for p in added)))
        lfs = sorted(set(out[i] for i in range(0, len(out) - 2, 3) if out[i + 2] == "lfs"))
        if lfs:
            self.git("update-index", "-z", "--force-remove", "--stdin",
                     input=b"".join(os.fsencode(p) + b"\0" for p in lfs))
        return dict((path, LFS_NEW_REASON) for path in lfs)

    def problems(self):
        """[path, why] for every entry of the resulting tree the host would leave out, big files included."""
        raw = split_z(self.git("diff-index", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", self.base))
        links = {}
        for meta, path in zip_z(self.git("ls-files", "-s", "-z")):
            if meta.split()[0] == "120000":
                try:
                    links[path] = os.readlink(os.path.join(self.ws.root, path))
                except OSError:
                    links[path] = ""
        found = [[p, why] for p, why in sorted(self.left.items())]
        for meta, path in zip(raw[0::2], raw[1::2]):
            new_mode = meta.lstrip(":").split(" ")[1]
            why = path_problem(path)
            if why is None and new_mode == "160000":
                why = "a nested git repository (a gitlink); remove its .git directory or leave it out"
            elif why is None and new_mode not in ("100644", "100755", "120000", "000000"):
                why = "unsupported file mode %s" % new_mode
            elif why is None and new_mode == "120000":
                why = link_problem(path, links)
            if why:
                found.append([path, why])
        return found

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


LFS_POINTER_MAX = 1024  # the Git LFS spec caps a pointer file at 1024 bytes
LFS_VERSIONS = (b"version https://git-lfs.github.com/spec/v1\n", b"version https://hawser.github.com/spec/v1\n")
LFS_REASON = "tracked by Git LFS: decode-bot does not carry LFS content; change it by hand"
LFS_NEW_REASON = ("matches a Git LFS pattern in .gitattributes: decode-bot does not carry LFS content; "
                  "add it by hand")
SUBMODULE_REASON = "changes inside the submodule %s are not carried (decode-bot commits to this repository only)"


def read_blobs(stage, shas):
    """sha -> content for each blob in `shas` (small ones: LFS pointer candidates)."""
    shas = sorted(set(shas))
    if not shas:
        return {}
    out, found, at = stage.git("cat-file", "--batch", input="".join(s + "\n" for s in shas).encode()), {}, 0
    for sha in shas:
        end = out.index(b"\n", at)
        size = int(out[at:end].split(b" ")[2])
        found[sha], at = out[end + 1:end + 1 + size], end + 2 + size
    return found


def lfs_pointer(data):
    """(sha256 hex or "", size or -1) when `data` is a Git LFS pointer file, else None."""
    if not data.startswith(LFS_VERSIONS):
        return None
    oid, size = "", -1
    for line in data.decode("utf-8", "replace").splitlines()[1:]:
        key, _, value = line.partition(" ")
        if key == "oid" and re.match(r"^sha256:[0-9a-f]{64}$", value):
            oid = value[len("sha256:"):]
        elif key == "size" and value.isdigit():
            size = int(value)
    return oid, size


def lfs_unchanged(full, blob, pointer, mode):
    """Whether the file at `full` still holds the pointer `blob`, or the content it names, with the base's mode."""
    try:
        st = os.lstat(full)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or (mode == "100755") != bool(st.st_mode & 0o100):
        return False
    oid, size = pointer
    if st.st_size == len(blob):
        with open(full, "rb") as f:
            if f.read() == blob:
                return True
    if not oid or st.st_size != size:
        return False
    digest = hashlib.sha256()
    with open(full, "rb") as f:
        for chunk in iter(lambda: f.read(READ_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest() == oid


def submodule_changes(root, tracked, keep):
    """Submodules of the base (gitlinks): kept as in the base, and named when anything inside them changed.

    The hand-back commits to this repository only, so a submodule's gitlink
    never moves. Nothing in a submodule's git dir is run or configured: its
    HEAD is read as a file, its objects are only borrowed to compare trees.
    """
    found = {}
    for path, meta in sorted(tracked.items()):
        if meta[0] == "160000":
            keep.add(path)
            if submodule_changed(root, path, meta[1]):
                found[path] = SUBMODULE_REASON % path
    return found


def submodule_changed(root, path, sha):
    """Whether the submodule at `path` (base commit `sha`) differs from it: files, nested submodules or HEAD.

    An empty directory is a submodule that was never checked out: unchanged.
    """
    full = os.path.join(root, path)
    try:
        st = os.lstat(full)
    except OSError:
        return True
    if not stat.S_ISDIR(st.st_mode):
        return True
    if not os.listdir(full):
        return False
    gitdir = submodule_gitdir(full)
    if gitdir is not None and read_head(gitdir) != sha:
        return True
    objects = [os.path.join(gitdir, "objects")] if gitdir else []
    for dirpath, dirnames, _ in os.walk(os.path.join(root, ".git", "modules")):
        if "objects" in dirnames and os.path.isfile(os.path.join(dirpath, "HEAD")):
            objects.append(os.path.join(dirpath, "objects"))
        dirnames[:] = [d for d in dirnames if d != "objects"]
    tmp = tempfile.mkdtemp(prefix="decode-submodule-")
    try:
        scratch = os.path.join(tmp, "git")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}
        if run_git(["init", "-q", "--bare", scratch], env, tmp)[0] != 0:
            return True
        with open(os.path.join(scratch, "objects", "info", "alternates"), "w") as f:
            f.write("".join(d + "\n" for d in objects))
        with open(os.path.join(scratch, "info", "exclude"), "w") as f:
            f.write("\n".join(EXPORT_EXCLUDES) + "\n")
        env.update(GIT_DIR=scratch, GIT_WORK_TREE=full, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        code, tree = run_git(["rev-parse", "--verify", "--quiet", sha + "^{tree}"], env, full)
        if code != 0 or run_git(["read-tree", sha], env, full)[0] != 0:
            return True  # files, but not the commit to compare them with
        nested = [(p, meta.split()[1]) for meta, p in zip_z(run_git(["ls-files", "-s", "-z"], env, full)[1])
                  if meta.split()[0] == "160000"]
        spec = [":(exclude,literal)" + p for p, _ in nested]
        if run_git(["add", "-A", "--", "."] + spec, env, full)[0] != 0:
            return True
        code, written = run_git(["write-tree"], env, full)
        if code != 0 or written.strip() != tree.strip():
            return True
        return any(submodule_changed(full, p, s) for p, s in nested)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def submodule_gitdir(full):
    """The git dir of the checked-out submodule at `full` (its `.git` directory, or where its `.git` file points)."""
    dotgit = os.path.join(full, ".git")
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        return dotgit
    try:
        with open(dotgit, "rb") as f:
            line = f.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir: "):
        return None
    return os.path.normpath(os.path.join(full, line[len("gitdir: "):].strip()))


def read_head(gitdir):
    """The commit a git dir's HEAD names, read from its files (loose or packed refs), or None."""
    try:
        with open(os.path.join(gitdir, "HEAD"), "rb") as f:
            head = f.read(4096).decode("utf-8", "replace").strip()
        if not head.startswith("ref: "):
            return head
        ref = head[len("ref: "):]
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        try:
            with open(os.path.join(gitdir, ref), "rb") as f:
                return f.read(4096).decode("utf-8", "replace").strip()
        except OSError:
            with open(os.path.join(gitdir, "packed-refs"), "rb") as f:
                for line in f.read().decode("utf-8", "replace").splitlines():
                    if line.endswith(" " + ref):
                        return line.split(" ")[0]
    except OSError:
        pass
    return None


def run_git(args, env, cwd, input=None):
    """(exit code, stdout) of one git command with hooks and fsmonitor off."""
    res = subprocess.run(["git", "-c", "core.hooksPath=" + os.devnull, "-c", "core.fsmonitor=false"] + list(args),
                         env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, input=input)
    return res.returncode, res.stdout


def split_z(data):
    return [os.fsdecode(p) for p in data.split(b"\0") if p]


def zip_z(data):
    """`git ls-files -s -z` records as (meta, path)."""
    out = []
    for record in data.split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            out.append((meta.decode(), os.fsdecode(path)))
    return out


def path_problem(path):
    """Why the host would refuse `path` whatever its content, or None (see bot/workspace/clone.py)."""
    if not path or path.startswith("/"):
        return "an absolute or empty path"
    for part in path.split("/"):
        if part == "..":
            return "leaves the repository through '..'"
        if part.lower().rstrip(" .") in (".git", "git~1"):
            return "inside .git; git's own files are never committed"
    return None


def link_problem(path, links):
    """Why the symlink at `path` would not stay inside the tree, or None.

    `links` maps every symlink of the resulting tree to its target. The target is
    resolved against that tree, following links on the way (chains, directories
    that are links, any case); a name the tree lacks counts as a plain directory.
    The host does the same in bot/workspace/clone.py (`link_problem`), and decides.
    """
    folded = dict((p.lower(), t) for p, t in links.items())
    target = links[path]
    at, todo, hops = path.split("/")[:-1], target.split("/"), 0
    if target.startswith("/"):
        return "a symlink to %s, an absolute path outside the repository" % target
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not at:
                return "a symlink to %s, which resolves outside the repository" % target
            at.pop()
            continue
        if part.lower().rstrip(" .") in (".git", "git~1"):
            return "a symlink to %s, which resolves into .git" % target
        here = "/".join(at + [part]).lower()
        if here in folded:
            hops += 1
            if hops > LINK_HOPS:
                return "a symlink to %s, which loops through other symlinks" % target
            if folded[here].startswith("/"):
                return "a symlink to %s, which resolves outside the repository" % target
            todo = folded[here].split("/") + todo
            continue
        at.append(part)
    return None


def op_check(ws, req):
    """What the hand-back would leave out, and why: {"left_out": [[path, why], ...]}."""
    stage = Stage(ws, req.get("base"), req.get("max_file_bytes"))
    try:
        return {"left_out": stage.problems()}
    finally:
        stage.close()


def op_export(ws, req):
    """The workspace's changes against commit `base`, as a binary git patch kept in a file for
    `export_read`; files over `max_file_bytes`, changes inside submodules and to Git LFS files are left
    out and listed (`Stage.left`). Answers {"size", "left_out"}."""
    stage = Stage(ws, req.get("base"), req.get("max_file_bytes"))
    try:
        drop_export(ws)
        fd, ws.export_path = tempfile.mkstemp(prefix="decode-patch-")
        with os.fdopen(fd, "wb") as out:
            stage.git("diff", "--cached", "--binary", "--full-index", "--no-ext-diff", "--no-textconv",
                      "--no-color", "--no-renames", stage.base, stdout=out)
        left_out = [[p, why] for p, why in sorted(stage.left.items())]
        return {"size": os.path.getsize(ws.export_path), "left_out": left_out}
    finally:
        stage.close()


def op_export_read(ws, req):
    """Up to `length` bytes of the last export from `offset`, base64; the file goes once read to the end."""
    path = getattr(ws, "export_path", None)
    if not path:
        raise Refused("no export to read: call export first")
    offset, length = int(req.get("offset") or 0), min(int(req.get("length") or READ_CHUNK), READ_CHUNK)
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if not data:
        drop_export(ws)
    return {"data": base64.b64encode(data).decode()}


def drop_export(ws):
    path, ws.export_path = getattr(ws, "export_path", None), None
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


OPS = {
    "ping": lambda ws, req: {"pid": os.getpid(), "root": ws.root},
    "exec": op_exec,
    "read": op_read,
    "write": op_write,
    "glob": op_glob,
    "grep": op_grep,
    "export": op_export,
    "export_read": op_export_read,
    "check": op_check,
}


def serve(root, stdin, stdout):
    ws = Workspace(root)
    for line in stdin:
        reap()
        try:
            req = json.loads(line)
            handler = OPS[req["op"]]
        except (ValueError, KeyError, TypeError):
            answer = {"id": None, "ok": False, "error": "malformed request"}
        else:
            try:
                answer = handler(ws, req)
                answer["ok"] = True
            except Refused as e:
                answer = {"ok": False, "error": str(e)}
            except Exception as e:  # noqa: BLE001 - every failure is an answer, never a crash
                answer = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
            answer["id"] = req.get("id")
        stdout.write((json.dumps(answer) + "\n").encode())
        stdout.flush()


EGRESS_SOCKET = "DECODE_EGRESS_SOCKET"
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")
NO_PROXY = "localhost,127.0.0.1,::1"
NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # SIGPIPE keeps its default action here: a send must not raise it
HALF_CLOSED_S = 30.0


def start_egress():
    """Relay 127.0.0.1:PORT to the egress proxy named by DECODE_EGRESS_SOCKET and point every command
    at it (http_proxy, https_proxy and their upper-case forms; no_proxy for loopback). Returns the
    port, or None when there is no proxy (the local and modal backends)."""
    path = os.environ.get(EGRESS_SOCKET)
    if not path:
        return None
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    port = server.getsockname()[1]
    spawn(accept_egress, server, path)
    for name in PROXY_VARS:
        os.environ[name] = "http://127.0.0.1:%d" % port
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = NO_PROXY
    return port


def spawn(target, *args):
    thread = threading.Thread(target=target, args=args)
    thread.daemon = True
    thread.start()


def accept_egress(server, path):
    while True:
        try:
            client, _ = server.accept()
        except OSError:  # out of descriptors: let connections finish
            time.sleep(0.05)
            continue
        spawn(forward_egress, client, path)


def forward_egress(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            upstream.connect(path)
        except OSError as e:
            body = ("decode-bot's egress proxy is not reachable at %s: %s\n" % (path, e)).encode()
            head = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            client.sendall(head + body, NOSIGNAL)
            return
        relay(client, upstream)
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


def relay(a, b):
    """Copy bytes both ways until both sides have finished sending (the other gets HALF_CLOSED_S more)."""
    peer = {a.fileno(): (a, b), b.fileno(): (b, a)}
    poller = select.poll()
    for fd in peer:
        poller.register(fd, select.POLLIN)
    open_ends = 2
    while open_ends:
        events = poller.poll(None if open_ends == 2 else HALF_CLOSED_S * 1000)
        if not events:
            return
        for fd, _ in events:
            source, target = peer[fd]
            data = source.recv(65536)
            if data:
                target.sendall(data, NOSIGNAL)
                continue
            poller.unregister(fd)
            open_ends -= 1
            try:
                target.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: agentd.py WORKSPACE\n")
        return 2
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    become_subreaper()
    start_egress()
    try:
        serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
    finally:
        kill_descendants()
    return 0


if __name__ == "__main__":
    sys.exit(main())
