"""The top level of ``jaxclp`` is curated: what a user calls, each name reachable from one place.

``jaxclp.__all__`` stays small (at most :data:`MAX_NAMES`), every name in it resolves and is public, and the API
reference's index page (``docs/api/index.md``, section "The top level") lists exactly that set. Everything else is
imported from the module that defines it (``jaxclp.graph.spmm``, ``jaxclp.gnn.fit_gnn``, ...).
"""

import importlib
import re
from pathlib import Path

import pytest

import jaxclp

REPO = Path(__file__).resolve().parents[2]
MAX_NAMES = 45
INDEX = REPO / "docs" / "api" / "index.md"


def documented_top_level(text: str) -> list[str]:
    """The backticked names of the section "## The top level" of the API index (its table), in order."""
    m = re.search(r"^## The top level\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, "docs/api/index.md has no '## The top level' section"
    rows = [line for line in m.group(1).splitlines() if line.startswith("|") and not line.startswith("|---")]
    return [name for row in rows[1:] for name in re.findall(r"`(\w+)`", row.split("|")[2])]


def test_all_is_small_public_and_resolves():
    names = jaxclp.__all__
    assert len(names) <= MAX_NAMES, f"{len(names)} top-level names (at most {MAX_NAMES})"
    assert len(set(names)) == len(names), "a name is listed twice in jaxclp.__all__"
    assert not [n for n in names if n.startswith("_")]
    for name in names:
        assert getattr(jaxclp, name) is not None, name
    namespace = {}
    exec("from jaxclp import *", namespace)
    assert set(names) <= set(namespace)


def test_api_index_lists_exactly_all():
    listed = documented_top_level(INDEX.read_text())
    assert len(set(listed)) == len(listed), "a name is listed twice in docs/api/index.md"
    assert set(listed) == set(jaxclp.__all__), (
        f"only in jaxclp.__all__: {sorted(set(jaxclp.__all__) - set(listed))}; "
        f"only in docs/api/index.md: {sorted(set(listed) - set(jaxclp.__all__))}")


def test_the_list_check_reads_the_table():
    text = "## The top level\n\n| what | names |\n|---|---|\n| a | `CLP`, `solve` |\n| b | `Graph` |\n\n## Next\n`x`"
    assert documented_top_level(text) == ["CLP", "solve", "Graph"]


@pytest.mark.parametrize("module,name", [("jaxclp.graph", "spmm_transpose"), ("jaxclp.gnn", "two_hop_graph"),
                                         ("jaxclp.gnn", "gnn_param_count"), ("jaxclp.solve", "solve_operator"),
                                         ("jaxclp.nonlinear", "nonlinear_grid"), ("jaxclp.halo_plan", "build_plan"),
                                         ("jaxclp.sharded_clp", "ShardedOperator"), ("jaxclp.priors", "LINKX")])
def test_internals_live_in_their_module_only(module, name):
    assert hasattr(importlib.import_module(module), name)
    assert name not in jaxclp.__all__ and not hasattr(jaxclp, name)


def test_no_deprecated_aliases_or_shims():
    """0.1 is unreleased: no deprecated names, no module-level ``__getattr__``, no re-export shim modules."""
    assert not hasattr(jaxclp, "__getattr__") and not hasattr(jaxclp, "_DEPRECATED")
    for gone in ("authors_grid", "AuthorsResult", "authors", "shard"):
        assert not hasattr(jaxclp, gone), gone
    for module in ("jaxclp.authors", "jaxclp.shard"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(module)


def test_enable_compilation_cache_is_explicit(tmp_path, monkeypatch):
    """``jaxclp.enable_compilation_cache(path)`` turns on JAX's persistent cache at ``path`` (every executable
    cached); without ``path`` it follows ``$JAXCLP_XLA_CACHE`` (``off``: nothing changes); ``import jaxclp`` alone
    changes no JAX setting (checked in a fresh process)."""
    import os
    import subprocess
    import sys

    import jax

    keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    before = {k: getattr(jax.config, k) for k in keys}
    try:
        assert jaxclp.enable_compilation_cache(tmp_path / "xla") == tmp_path / "xla"
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "xla")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
        monkeypatch.setenv("JAXCLP_XLA_CACHE", str(tmp_path / "env"))
        assert jaxclp.enable_compilation_cache() == tmp_path / "env"
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "env")
        monkeypatch.setenv("JAXCLP_XLA_CACHE", "off")
        assert jaxclp.enable_compilation_cache() is None
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "env")  # unchanged
    finally:
        for k, v in before.items():
            jax.config.update(k, v)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    code = ("import jax\nget = lambda: (jax.config.jax_compilation_cache_dir, "
            "jax.config.jax_persistent_cache_min_compile_time_secs)\na = get()\nimport jaxclp\nb = get()\n"
            "assert a == b and a[0] is None, (a, b)\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
