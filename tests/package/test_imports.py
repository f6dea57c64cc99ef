"""The package's import graph has no cycle (module-level AND function-level imports).

Every module under ``src/jaxclp/`` (the runner and the benchmarks included) is parsed with :mod:`ast` (never
imported): each ``import jaxclp.x``, ``from jaxclp import x`` (``x`` a submodule: an edge to it; a name defined in
the package: an edge to ``jaxclp/__init__.py``), ``from jaxclp.x import y`` and relative import becomes an edge, wherever it is written
(a function body too: a lazy import only hides a cycle). Imports under ``if TYPE_CHECKING:`` are not run and do
not count. The test fails naming every cycle it finds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "jaxclp"


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file of every module of the package (``jaxclp`` for ``jaxclp/__init__.py``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node of ``tree``, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking_block(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: dict) -> str | None:
    """The longest prefix of dotted ``name`` that is a module of the package (None outside it)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in modules:
            return cand
    return None


def _bound_names(path: Path) -> set[str]:
    """Names a package's ``__init__.py`` binds at its top level (definitions, assignments, imports)."""
    names = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its body).

    ``from pkg import x`` is an edge to the submodule ``pkg.x`` where that file exists, to ``pkg`` (its
    ``__init__.py``) where ``x`` is a name bound there, and no edge otherwise (a compiled extension such as
    ``jaxclp._kernels``, which imports nothing of the package)."""
    modules = module_names(root)
    bound = {m: _bound_names(p) for m, p in modules.items() if p.name == "__init__.py"}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = mod if is_pkg else mod.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [_resolve(a.name, modules) for a in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: strip (level - 1) packages from this module's package
                    pkg = package.split(".")
                    pkg = pkg[:len(pkg) - (node.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}" if base else alias.name
                    # `from pkg import sub` is the submodule where one exists, else a name of pkg itself
                    if sub in modules:
                        targets.append(sub)
                    elif base not in bound or alias.name in bound[base] or alias.name == "*":
                        targets.append(_resolve(base, modules))
            graph[mod].update(t for t in targets if t is not None and t != mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a closed path ``[a, b, ..., a]``) per strongly connected component with more than one
    module (Tarjan's algorithm, then a shortest cycle through the component's first module)."""
    index, low, on, stack, comps = {}, {}, set(), [], []

    def strong(v):  # iterative Tarjan
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:
        inside = set(comp)
        start = comp[0]
        prev, frontier = {start: None}, [start]
        found = None
        while frontier and found is None:  # breadth first: the shortest way back to start
            nxt = []
            for u in frontier:
                for w in sorted(graph[u] & inside):
                    if w == start:
                        found = u
                        break
                    if w not in prev:
                        prev[w] = u
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        path = [start]
        u = found
        while u is not None and u != start:
            path.append(u)
            u = prev[u]
        out.append([start] + path[1:][::-1] + [start] + ([] if len(comp) == 2 else [f"(component: {comp})"]))
    return out


# ----------------------------------------------------------------------------------------- the checker itself
def _write(tmp_path, files: dict[str, str]) -> Path:
    root = tmp_path / "jaxclp"
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_checker_sees_function_level_relative_and_package_imports(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "from jaxclp.a import f\n",
        "a.py": "def f():\n    from jaxclp import b\n",  # a lazy import of a submodule
        "b.py": "from . import c\n",  # relative
        "c.py": "import jaxclp.a\n",
        "d.py": "from jaxclp import f\n",  # a name of the package: an edge to its __init__
        "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jaxclp import d\n",
        "sub/__init__.py": "from ..e import TYPE_CHECKING\n",
    })
    g = import_graph(root)
    assert g == {"jaxclp": {"jaxclp.a"}, "jaxclp.a": {"jaxclp.b"}, "jaxclp.b": {"jaxclp.c"},
                 "jaxclp.c": {"jaxclp.a"}, "jaxclp.d": {"jaxclp"}, "jaxclp.e": set(),
                 "jaxclp.sub": {"jaxclp.e"}}
    assert cycles(g) == [["jaxclp.a", "jaxclp.b", "jaxclp.c", "jaxclp.a",
                          "(component: ['jaxclp.a', 'jaxclp.b', 'jaxclp.c'])"]]
    assert cycles({"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [["x", "y", "x"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


# ----------------------------------------------------------------------------------------- the package
def test_package_has_no_import_cycle():
    graph = import_graph()
    assert "jaxclp.solve" in graph and "jaxclp.propagate" in graph["jaxclp.solve"]  # the parser sees the package
    found = cycles(graph)
    if found:
        pytest.fail("import cycles in jaxclp/ (function-level imports included):\n"
                    + "\n".join(" -> ".join(c) for c in found))


# ----------------------------------------------------------------------------------------- one pipeline
STAGES = ("jaxclp.baselines", "jaxclp.clp", "jaxclp.compatibility", "jaxclp.operator", "jaxclp.propagate",
          "jaxclp.solve")
SHARDING = ("jaxclp.sharded_clp", "jaxclp.sharded_graph", "jaxclp.halo", "jaxclp.halo_plan", "jaxclp.partition")
GRAPH_TYPES = {"Graph", "ShardedGraph", "GraphLike"}


def test_stages_neither_import_the_sharding_modules_nor_test_the_graph_type():
    """The stages are written once against the graph protocol (jaxclp/protocol.py): none of them imports a
    sharding module (anywhere in its body) or calls ``isinstance(..., Graph / ShardedGraph / GraphLike)``."""
    graph = import_graph()
    for mod in STAGES:
        assert not graph[mod] & set(SHARDING), (mod, sorted(graph[mod] & set(SHARDING)))
        path = module_names()[mod]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                assert not names & GRAPH_TYPES, f"{path.name}:{node.lineno} tests the graph's type"
    # and the sharding modules never reach back into the stages (only jaxclp.sharded_clp, the stages, does)
    for mod in SHARDING[1:]:
        assert not graph[mod] & set(STAGES), (mod, sorted(graph[mod] & set(STAGES)))


def test_graph_implements_the_protocol():
    import numpy as np

    import jaxclp

    g = jaxclp.Graph.from_edge_index(np.array([[0, 1], [1, 2]]), 3)
    assert isinstance(g, jaxclp.GraphLike) and g.has_edge_list and g.real_rows is None
    x = np.arange(6.0).reshape(3, 2)
    assert g.to_internal(x) is x and g.from_internal(x) is x
    np.testing.assert_allclose(np.asarray(g.spmm(g.edge_values("none"), x)), np.asarray(g.to_dense()) @ x)
    np.testing.assert_allclose(np.asarray(g.spmm_linear(g.edge_values("none"), x)), np.asarray(g.to_dense()) @ x)


# ----------------------------------------------------------------------------------------- imports at the top
MAX_FUNCTION_LEVEL_IMPORTS = 10
"""Function-level imports of the package's own modules allowed outside ``benchmarks`` folders: a few, for optional
heavy dependencies (the compiled extension, plotting, docs hooks); everything else imports at module top."""


def _function_level_jaxclp_imports(root: Path = PACKAGE) -> list[str]:
    """``file:line`` of every import of ``jaxclp`` / ``jaxclp.*`` (or a relative import) written inside a function
    (its parent chain holds a FunctionDef / AsyncFunctionDef), in the package's modules outside any ``benchmarks``
    folder; imports under ``if TYPE_CHECKING:`` are not run and do not count."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if "benchmarks" in path.relative_to(root).parts:
            continue

        def visit(node, in_function):
            if _type_checking_block(node):
                children = node.orelse
            else:
                children = list(ast.iter_child_nodes(node))
            if isinstance(node, ast.Import):
                ours = any(a.name == "jaxclp" or a.name.startswith("jaxclp.") for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                ours = node.level > 0 or mod == "jaxclp" or mod.startswith("jaxclp.")
            else:
                ours = False
            if ours and in_function:
                out.append(f"{path.relative_to(root.parent)}:{node.lineno}")
            in_function = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for child in children:
                visit(child, in_function)

        visit(ast.parse(path.read_text(), str(path)), False)
    return out


def test_few_function_level_imports_of_the_package(tmp_path):
    """Modules import the package's modules at their top: a lazy import hides the layering (and costs a dict
    look-up per call); at most :data:`MAX_FUNCTION_LEVEL_IMPORTS` remain, for optional heavy dependencies."""
    root = _write(tmp_path, {
        "__init__.py": "import jaxclp.a\n",
        "a.py": "def f():\n    import jaxclp.b\n    from . import c\n    import numpy\n"
                "    if TYPE_CHECKING:\n        from jaxclp import d\n",
        "b.py": "class C:\n    async def g(self):\n        from jaxclp.c import x\n",
        "benchmarks/run.py": "def main():\n    from jaxclp import a\n",
    })
    assert _function_level_jaxclp_imports(root) == ["jaxclp/a.py:2", "jaxclp/a.py:3", "jaxclp/b.py:3"]
    found = _function_level_jaxclp_imports()
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, (
        f"{len(found)} function-level imports of jaxclp modules (at most {MAX_FUNCTION_LEVEL_IMPORTS}): "
        "move them to the module's top, or fix the layering they hide:\n" + "\n".join(found))


# ----------------------------------------------------------------------------------------- no identity-keyed state
_CONTAINERS = {"dict", "set", "list", "defaultdict", "OrderedDict", "WeakKeyDictionary", "WeakValueDictionary",
               "WeakSet"}


def _module_containers(tree: ast.Module) -> dict[str, int]:
    """Names bound at module level to a mutable container (a dict / set / list display or a call of one of
    :data:`_CONTAINERS`) -> line."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            func = value.func if isinstance(value, ast.Call) else None
            name = getattr(func, "id", None) or getattr(func, "attr", None)
            if isinstance(value, (ast.Dict, ast.Set, ast.List)) or name in _CONTAINERS:
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    out.update({n.id: node.lineno for n in ast.walk(t) if isinstance(n, ast.Name)})
    return out


def identity_keyed_state(root: Path = PACKAGE) -> list[str]:
    """``file:line`` of every use of ``id(...)`` or of :mod:`weakref` in a module of ``root`` (outside any
    ``benchmarks`` folder) that also binds a mutable container at module level: state keyed by object identity
    (a memo ``{id(graph): (weakref.ref(graph), value)}``), which a value passed by the caller should replace."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "benchmarks" in path.relative_to(root.parent).parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        containers = _module_containers(tree)
        if not containers:
            continue
        where = path.relative_to(root.parent.parent) if root == PACKAGE else path.relative_to(root.parent)
        for node in sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")), key=lambda n: n.lineno):
            is_id = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"
            is_weakref = (isinstance(node, ast.Name) and node.id == "weakref") or (
                isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                    "weakref" in (a.name, getattr(node, "module", None)) for a in node.names))
            if is_id or is_weakref:
                what = "id(...)" if is_id else "weakref"
                found.append(f"{where}:{node.lineno}: {what}, with module-level container(s) "
                             + ", ".join(f"{k} (line {v})" for k, v in sorted(containers.items(), key=lambda kv: kv[1])))
    return found


def test_checker_sees_identity_keyed_state(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "",
        "memo.py": "import weakref\n_MEMO: dict[int, tuple] = {}\n\ndef f(g):\n    return _MEMO.get(id(g))\n",
        "local.py": "def f(xs):\n    seen = {}\n    return [seen.setdefault(id(x), x) for x in xs]\n",  # no module state
        "benchmarks/b.py": "_C = {}\n\ndef f(g):\n    _C[id(g)] = g\n",  # benchmarks are left out
    })
    got = identity_keyed_state(root)
    assert [line.split(":")[:2] for line in got] == [["jaxclp/memo.py", "1"], ["jaxclp/memo.py", "5"]], got
    assert "_MEMO (line 2)" in got[0]


def test_no_module_level_state_keyed_by_object_identity():
    """No module of the package keeps a module-level memo keyed by ``id(...)`` (or held by weak references): such
    state is hidden from the caller, lives as long as an object happens to, and makes a call's cost depend on what
    ran before. A value the caller builds once and passes (e.g. H2GCN's ``two_hop=``) replaces it."""
    found = identity_keyed_state()
    if found:
        pytest.fail("module-level state keyed by object identity (pass a value instead):\n" + "\n".join(found))


def test_the_library_never_imports_the_benchmarks():
    """Nothing under src/jaxclp imports the clone's ``benchmarks`` package (nor a ``jaxclp.benchmarks``): the
    benchmarks import the library, never the reverse, and they are not in the wheel (tests/package/test_packaging.py)."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "jaxclp"
    assert not (src / "benchmarks").exists()

    def hit(name):
        return name in ("benchmarks", "jaxclp.benchmarks") or name.startswith(("benchmarks.", "jaxclp.benchmarks."))

    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            if any(hit(n) for n in names):
                found.append(f"{path.relative_to(src.parent)}:{node.lineno}")
    assert found == [], found
