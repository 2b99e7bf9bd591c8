"""agentd: the one persistent process that runs inside every sandbox.

It is started once per sandbox (`python3 -I agentd.pyz WORKSPACE`, the zipapp
that `bot.sandbox.shipping` builds from this package) and serves requests as
JSON lines on stdin, one JSON line answer each on stdout, so a tool call costs
a pipe round trip instead of a `docker exec`. It runs on whatever Python the
sandbox has, so it uses the standard library only and stays compatible with
Python 3.8; its modules import each other relatively, nothing of `bot`.

One module per job:
- `rpc`: the wire (framing, dispatch) and `main`;
- `processes`: `exec`, process groups, the subreaper that ends what commands leave behind;
- `files`: `read`, `write`, `glob`, `grep`;
- `handback`: `check` and `export` (the changes as a patch), with Git LFS files,
  `submodules` and the `scratch` git dirs they are staged in;
- `mcp`: MCP servers, started in the workspace and their stdio lines relayed to the harness;
- `relay`: egress, 127.0.0.1:PORT relayed to the harness's proxy socket;
- `paths`: the workspace's bounds and the path, link, mode and LFS rules, which
  the host's hand-back check imports too (`bot.workspace.patch_check`).

Every path is resolved inside the sandbox and refused when it lands outside the
workspace (through "..", an absolute path or a symlink).
"""
