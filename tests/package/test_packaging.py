"""Install hygiene: the library and its runner live under the ``jaxclp`` name, nothing generic is top-level; the
benchmarks are the clone's top-level ``benchmarks`` package, never installed and never imported by ``jaxclp``."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import ast
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def test_declared_packages_are_all_under_jaxclp():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    st = cfg["tool"]["setuptools"]
    # src/ layout: packages found under src/, no package-dir remapping (which forces setuptools' editable finder
    # and lets a clone named jaxclp shadow the install, see test_clone_named_jaxclp_does_not_shadow)
    assert st["packages"]["find"]["where"] == ["src"] and "package-dir" not in st
    assert cfg["project"]["scripts"]["jaxclp"] == "jaxclp.experiments.cli:main"
    found = {str(p.parent.relative_to(REPO / "src")).replace("/", ".") for p in (REPO / "src").rglob("__init__.py")}
    assert {"jaxclp", "jaxclp.experiments", "jaxclp.datasets"} <= found
    assert all(p == "jaxclp" or p.startswith("jaxclp.") for p in found), found
    assert not (REPO / "jaxclp").exists() and not (REPO / "experiments").exists()
    # the benchmarks: a package of the clone (python -m benchmarks.NAME from its root), not of the wheel
    assert "jaxclp.benchmarks" not in found and (REPO / "benchmarks" / "__init__.py").is_file()
    assert "jaxclp.benchmarks" not in st.get("package-data", {})


def test_clone_named_jaxclp_does_not_shadow(tmp_path):
    # A user runs Python in the folder above a clone named jaxclp: the installed package is imported, not the
    # clone's root as a namespace package ("module 'jaxclp' has no attribute 'CLP'").
    (tmp_path / "jaxclp").symlink_to(REPO, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", "import jaxclp; print(jaxclp.CLP.__name__, jaxclp.__file__)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    name, file = done.stdout.split()
    assert name == "CLP" and Path(file).name == "__init__.py"


def test_installed_names(tmp_path):
    # From a directory outside the repository: only the jaxclp names import (no benchmarks, under any name).
    code = ("import importlib.util as u, jaxclp.experiments.runner;"
            "print(u.find_spec('experiments') is None, u.find_spec('benchmarks') is None, "
            "u.find_spec('jaxclp.benchmarks') is None)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
    done = subprocess.run([sys.executable, "-m", "jaxclp", "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "reproduce" in done.stdout, done.stderr


# ------------------------------------------------------------------------------------------- the built wheel
def imports_benchmarks(source: str) -> list[int]:
    """The lines of ``source`` (Python) that import the clone's ``benchmarks`` package or ``jaxclp.benchmarks``
    (``import benchmarks``, ``import benchmarks.x``, ``from benchmarks import ...``, ``from benchmarks.x import``)."""
    hit = lambda name: name in ("benchmarks", "jaxclp.benchmarks") or name.startswith(("benchmarks.",
                                                                                      "jaxclp.benchmarks."))
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(hit(a.name) for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                hit(node.module) or (node.module == "jaxclp" and any(a.name == "benchmarks" for a in node.names))):
            lines.append(node.lineno)
    return lines


def test_imports_benchmarks_sees_each_form():
    src = ("import benchmarks\nimport benchmarks.run as r\nfrom benchmarks import cost\nfrom benchmarks.x import y\n"
           "from jaxclp.benchmarks import z\nfrom jaxclp import benchmarks\nimport jaxclp\nfrom . import benchmarks\n"
           "x = 'import benchmarks'\n")
    assert imports_benchmarks(src) == [1, 2, 3, 4, 5, 6]


def _graph_files(folder: Path) -> tuple[Path, Path, int]:
    """A 36-node graph of three planted communities (edge list CSV) and its labels CSV, a third unlabelled."""
    rng = np.random.default_rng(0)
    n, k = 36, 3
    y = np.arange(n) % k
    edges = [(i, j) for i in range(n) for j in range(i + 1, n)
             if rng.random() < (0.35 if y[i] == y[j] else 0.03)]
    edges += [(i, (i + k) % n) for i in range(n)]  # a ring inside each class: no isolated node
    (folder / "edges.csv").write_text("source,target\n" + "".join(f"{a},{b}\n" for a, b in edges))
    labelled = rng.random(n) < 0.67
    (folder / "labels.csv").write_text(
        "node,label\n" + "".join(f"{i},{y[i] if labelled[i] else ''}\n" for i in range(n)))
    return folder / "edges.csv", folder / "labels.csv", n


_NOT_SOURCES = (".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis", "results")


def _source_tree(dst: Path) -> Path:
    """The repository's sources (git's tracked and not ignored files: no build/, egg-info or compiled kernel)
    copied to ``dst``, so the wheel is built from scratch and nothing is written into the checkout. Outside a
    git checkout: the tree less build outputs, environments and results."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(REPO, dst, ignore=shutil.ignore_patterns(*_NOT_SOURCES, "*.egg-info", "*.so", "*.pyd"))
        return dst
    for rel in filter(None, listed):
        src = REPO / rel
        if rel.split("/", 1)[0] in _NOT_SOURCES:  # committed results: not in the wheel, 10x the sources
            continue
        if src.is_file() and not src.name.endswith((".so", ".pyd")):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


@pytest.mark.slow  # ~30 s: builds the wheel and a venv (benchmarks/slow_tests.py runs it)
def test_wheel_installs_in_a_fresh_venv_and_predicts(tmp_path):
    """The wheel built from the sources (the C++ kernel where a compiler is found, else the build
    says it fell back) installs in a new virtual environment outside the repository, and ``jaxclp predict``
    there labels every node of a small edge-list graph, importing only that environment's jaxclp.

    Offline and quick: ``pip wheel --no-deps --no-build-isolation`` with this environment's setuptools and
    jaxlib (the FFI headers); the new venv reaches the heavy dependencies (jax, flax, ...) through a ``.pth``
    line naming this interpreter's site-packages (a plain path: that folder's own ``.pth`` files, among them
    the editable install of the checkout, are not run), and the wheel goes in with ``--no-deps``."""
    t0 = time.perf_counter()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "JAXCLP_DATA", "JAXCLP_DATA_URL", "JAXCLP_NO_FFI")}
    env.update(JAX_PLATFORMS="cpu", PYTHONNOUSERSITE="1", XDG_CACHE_HOME=str(tmp_path / "cache"),
               JAXCLP_XLA_CACHE="off", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for mod in ("setuptools", "wheel"):  # what --no-build-isolation needs here (the dev extra installs them)
        assert importlib.util.find_spec(mod) is not None, f"building the wheel needs {mod}: pip install -e '.[dev]'"

    src = _source_tree(tmp_path / "src")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(src)], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("jaxclp-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    kernels = [n for n in names if n.startswith("jaxclp/_kernels") and n.endswith((".so", ".pyd"))]
    fallback = "jaxclp's optional C++ kernel was not built" in built.stdout + built.stderr
    assert bool(kernels) != fallback, (kernels, fallback)  # the kernel, or the one-line fallback: never both
    if shutil.which("c++") or shutil.which("g++"):
        assert kernels, "a C++ compiler is here but the wheel has no kernel:\n" + built.stderr[-3000:]
    assert {"jaxclp/__init__.py", "jaxclp/experiments/cli.py"} <= set(names)
    # the benchmarks stay in the clone: no file of them in the wheel, no module of the wheel importing them
    assert not [n for n in names if n.startswith(("jaxclp/benchmarks/", "benchmarks/"))]
    with zipfile.ZipFile(wheel) as z:
        importing = {n: imports_benchmarks(z.read(n).decode()) for n in names if n.endswith(".py")}
    assert not {n: lines for n, lines in importing.items() if lines}, importing
    t_build = time.perf_counter() - t0

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=env, timeout=120)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             env=env, capture_output=True, text=True, check=True).stdout.strip()
    deps = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    Path(purelib, "_parent_env_deps.pth").write_text("".join(f"{p}\n" for p in sorted(deps)))
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                                str(wheel)], env=env, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]

    probe = ("import json, jaxclp, jaxclp.sparse as s; "
             "print(json.dumps([jaxclp.__file__, s.kernel_available(), __import__('sys').path]))")
    where = subprocess.run([str(py), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert where.returncode == 0, where.stderr[-3000:]
    file, kernel, path = json.loads(where.stdout.strip().splitlines()[-1])
    assert Path(file).resolve().is_relative_to(venv.resolve()), file
    assert kernel == bool(kernels)  # the wheel's kernel loads (and, without one, none is found elsewhere)
    # no folder of the checkout on the path, except this environment's site-packages (when it lies inside)
    repo_paths = [p for p in path if p and Path(p).resolve().is_relative_to(REPO.resolve())]
    assert all(p in deps for p in repo_paths), repo_paths

    edges, labels, n = _graph_files(tmp_path)
    out = tmp_path / "pred.csv"
    t1 = time.perf_counter()
    # clp_mlp: CLP on an MLP prior (dropout through jaxclp's key type, propagation through the wheel's kernel);
    # the default clp compares every base predictor, minutes on 2 cores
    run = subprocess.run([str(venv / "bin" / "jaxclp"), "predict", "--graph", edges.name, "--labels", labels.name,
                          "--out", out.name, "--method", "clp_mlp", "--epochs", "20", "--no-progress"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(int(r["node"]) for r in rows) == list(range(n))  # a row, so a label, for every node
    assert all(r["predicted"] in {"0", "1", "2"} for r in rows), rows[:3]
    y = np.arange(n) % 3
    assert all(int(r["label"]) == y[int(r["node"])] for r in rows if r["label"] != "")
    scores = np.array([[float(r[f"score_{c}"]) for c in range(3)] for r in rows])
    np.testing.assert_allclose(scores.sum(1), 1.0, atol=1e-4)
    unlabelled = [r for r in rows if r["label"] == ""]
    assert len(unlabelled) == n - sum(1 for line in labels.read_text().splitlines()[1:] if not line.endswith(","))
    assert np.mean([int(r["predicted"]) == y[int(r["node"])] for r in unlabelled]) >= 0.6  # 0.82 here
    print(f"wheel build {t_build:.1f} s (kernel: {bool(kernels)}), venv + install + probe "
          f"{t1 - t0 - t_build:.1f} s, predict {time.perf_counter() - t1:.1f} s")
