"""The package's layers point down only: no import cycle among treecomp's modules (imports
inside functions included) and no module importing or reading another module's private
(leading-underscore) name. Read statically from the source, so a lazy import cannot hide a loop.

Draw the graph: python -m tests.test_layers  (prints each module and what it imports)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "treecomp"


def modules() -> dict[str, Path]:
    """{dotted module name: file} of every module of the package."""
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _absolute(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """(module -> the package's modules it imports, the private names used across modules)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private: list[str] = []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}  # local name -> module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "treecomp":
                        edges[mod].add(a.name)
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "treecomp"
            elif isinstance(node, ast.ImportFrom):
                target = _absolute(mod, is_pkg, node.level, node.module)
                if target.split(".")[0] != "treecomp":
                    continue
                for a in node.names:
                    full = f"{target}.{a.name}"
                    if full in mods:
                        edges[mod].add(full)
                        aliases[a.asname or a.name] = full
                    else:
                        edges[mod].add(target)
                        if a.name.startswith("_") and not a.name.startswith("__"):
                            private.append(f"{mod} imports {target}.{a.name}")
        for node in ast.walk(tree):  # alias._name: a private name read through a module
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and aliases[node.value.id] != mod \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                private.append(f"{mod} reads {aliases[node.value.id]}.{node.attr}")
    for mod in edges:
        edges[mod] = {e for e in edges[mod] if e in mods and e != mod}
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycle():
    edges, _ = graph()
    assert len(edges) > 40  # the whole package was read
    assert cycles(edges) == []


def test_cycles_are_found():
    """The checker itself: a loop through three modules is reported."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_private_name_crosses_a_module():
    _, private = graph()
    assert private == []


if __name__ == "__main__":
    edges, private = graph()
    for mod in sorted(edges):
        print(f"{mod} -> {', '.join(sorted(edges[mod])) or '-'}")
    for c in cycles(edges):
        print("CYCLE:", " -> ".join(c), file=sys.stderr)
    for p in private:
        print("PRIVATE:", p, file=sys.stderr)
