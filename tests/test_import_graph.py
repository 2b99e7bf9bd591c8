"""The modules of bot/ import each other without a cycle.

Every `import` and `from ... import` naming a `bot` module counts, wherever it
stands: at module level, inside a function, or under `if TYPE_CHECKING:`. So a
cycle cannot be hidden by moving one of its imports into a function; the fix is
a protocol module that both sides import (bot/sandbox/protocol.py,
bot/model/protocol.py). The same graph holds the layers: a module imports only
from its own layer and the layers below it (`LAYERS`).
"""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parents[1] / "bot"


def module_files(top: Path = BOT) -> dict[str, Path]:
    """Dotted module name -> source file, for every module under `top` (packages by their __init__.py)."""
    found = {}
    for path in sorted(top.rglob("*.py")):
        parts = path.relative_to(top.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(module: str, source: str, modules: set[str], *, package: bool = False) -> set[str]:
    """The modules of `modules` that `source` (the text of `module`) imports, anywhere in the file."""

    def known(name: str) -> str | None:  # `bot.a.b.Name` -> `bot.a.b`, the module that holds it
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    here = module if package else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}".rstrip(".")
            # `from bot.sandbox import warm_pool` imports a submodule; `from bot.sandbox import Sandbox` the package
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in node.names)
    return {name for name in found if name is not None and name != module}


def import_graph(top: Path = BOT) -> dict[str, set[str]]:
    """Module -> the modules under `top` it imports."""
    files = module_files(top)
    return {name: imports_of(name, path.read_text(), set(files), package=path.name == "__init__.py")
            for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None when it has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if (cycle := visit(start)) is not None:
            return cycle
    return None


def test_bot_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "bot.sandbox.protocol" in graph["bot.sandbox"], "the graph is the real one"
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_an_import_inside_a_function_counts() -> None:
    modules = {"bot", "bot.a", "bot.b", "bot.pkg", "bot.pkg.c"}
    source = "from bot.pkg import c, Thing\nfrom . import b\ndef f():\n    import bot.a.x\n"
    assert imports_of("bot.pkg.d", source, modules) == {"bot.pkg.c", "bot.pkg", "bot.a"}
    assert imports_of("bot.pkg", "from . import c\nfrom .. import b\n", modules, package=True) == {"bot.pkg.c", "bot.b"}
    graph = {"bot.a": {"bot.b"}, "bot.b": {"bot.pkg"}, "bot.pkg": {"bot.a"}}
    assert find_cycle(graph) == ["bot.a", "bot.b", "bot.pkg", "bot.a"]
    assert find_cycle({"bot.a": {"bot.b"}, "bot.b": set()}) is None


RUN_LAYER = ("bot.run", "bot.agent", "bot.workspace")


def closure(graph: dict[str, set[str]], start: str) -> set[str]:
    """`start` and every module it imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        if (name := todo.pop()) not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


def test_the_github_edge_imports_nothing_of_the_run_layer() -> None:
    graph = import_graph()
    reached = closure(graph, "bot.github.forge")
    assert "bot.github.checks" in reached, "the closure is the real one"
    run_layer = sorted(m for m in reached if m.startswith(tuple(p + "." for p in RUN_LAYER)) or m in RUN_LAYER)
    assert run_layer == [], "bot/github/forge.py reaches the run layer: " + ", ".join(run_layer)


def test_closure_follows_every_hop() -> None:
    assert closure({"bot.a": {"bot.b"}, "bot.b": {"bot.c"}, "bot.d": {"bot.a"}}, "bot.a") == {"bot.a", "bot.b", "bot.c"}


# Top to bottom: a module may import its own layer and the layers below it, never one above.
LAYERS = (
    ("doors", ("bot.cli", "bot.action", "bot.modal_app", "bot.server")),
    ("jobs", ("bot.jobs",)),
    ("eval", ("bot.eval",)),
    ("github", ("bot.github",)),
    ("run", ("bot.run", "bot.agent", "bot.workspace")),
    ("boundaries", ("bot.sandbox", "bot.model")),
    ("base", ("bot", "bot.core", "bot.config")),  # `bot` itself: the package, holding only its version
)


def layer_of(module: str) -> int | None:
    """The index in `LAYERS` of `module`'s layer (0 is the top), or None for a module no layer names."""
    for index, (_, packages) in enumerate(LAYERS):
        if module in packages or any(module.startswith(p + ".") for p in packages if p != "bot"):
            return index
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of `graph` that reaches a layer above its importer's, as `importer -> imported (layer)`."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            here, there = layer_of(module), layer_of(target)
            if here is not None and there is not None and there < here:
                found.append(f"{module} -> {target} ({LAYERS[there][0]} is above {LAYERS[here][0]})")
    return found


def test_every_module_imports_only_its_own_layer_or_lower_ones() -> None:
    graph = import_graph()
    assert "bot.github.forge" in graph["bot.github.job"], "the graph is the real one"
    unplaced = sorted(m for m in graph if layer_of(m) is None)
    assert unplaced == [], "modules in no layer (add them to LAYERS): " + ", ".join(unplaced)
    upward = upward_imports(graph)
    assert upward == [], "imports that go up the layers:\n" + "\n".join(upward)


def test_the_layer_rule_on_a_small_graph() -> None:
    assert [layer_of(m) for m in ("bot.cli", "bot.server.web", "bot.workspace.clone", "bot", "bot.core")] \
        == [0, 0, 4, 6, 6]
    assert layer_of("bot.other") is None
    graph = {"bot.run.a": {"bot.agent.b", "bot.core.c", "bot.github.d"}, "bot.core.c": {"bot"},
             "bot.jobs.e": {"bot.github.d", "bot.cli"}}
    assert upward_imports(graph) == ["bot.jobs.e -> bot.cli (doors is above jobs)",
                                     "bot.run.a -> bot.github.d (github is above run)"]


def takes_whole_settings(source: str) -> bool:
    """Whether `source` imports the whole `Settings` (`from bot.config import Settings`, anywhere in the file) or
    reaches it as `bot.config.Settings`; its parts (`ModelSettings`, `Budget`, ...) do not count."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "bot.config" \
                and any(alias.name == "Settings" for alias in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Settings":
            return True
    return False


def test_only_the_doors_take_the_whole_settings() -> None:
    """Every layer below the doors takes the parts of the settings it reads (issue 34: a GitHub job its
    `JobParts`, a run its `RunParts`): a module there that imports `Settings` is named here."""
    below = [name for name, _ in LAYERS].index("jobs")
    takers = sorted(m for m, path in module_files().items() if takes_whole_settings(path.read_text())
                    and m != "bot.config" and not m.startswith("bot.config."))
    assert "bot.cli.run" in takers, "the check reads the real modules"
    offenders = [m for m in takers if (layer_of(m) or 0) >= below]
    assert offenders == [], "below the doors, these import the whole Settings (pass the parts): " \
        + ", ".join(offenders)


def test_the_whole_settings_is_found_however_it_is_imported() -> None:
    assert takes_whole_settings("from bot.config import Budget, Settings\n")
    assert takes_whole_settings("def f():\n    import bot.config\n    return bot.config.Settings()\n")
    assert not takes_whole_settings("from bot.config import Budget, ModelSettings, StoreSettings\n")
