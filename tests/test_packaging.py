"""Install hygiene: the runner and benchmarks live under the ``jaxclp`` name, nothing generic is top-level."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_declared_packages_are_all_under_jaxclp():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    st = cfg["tool"]["setuptools"]
    assert all(p == "jaxclp" or p.startswith("jaxclp.") for p in st["packages"])
    assert st["package-dir"]["jaxclp.experiments"] == "experiments"
    assert st["package-dir"]["jaxclp.benchmarks"] == "benchmarks"
    assert cfg["project"]["scripts"]["jaxclp"] == "jaxclp.experiments.cli:main"
    # every folder with an __init__.py under the mapped roots is listed (a forgotten subpackage would be
    # missing from a wheel although the editable install finds it)
    found = {"jaxclp." + str(p.parent.relative_to(REPO)).replace("/", ".")
             for root in ("experiments", "benchmarks") for p in (REPO / root).rglob("__init__.py")}
    found |= {str(p.parent.relative_to(REPO)).replace("/", ".") for p in (REPO / "jaxclp").rglob("__init__.py")}
    assert found == set(st["packages"])


def test_installed_names(tmp_path):
    # From a directory outside the repository: only the jaxclp names import.
    code = ("import importlib.util as u, jaxclp.experiments.runner, jaxclp.benchmarks.run;"
            "print(u.find_spec('experiments') is None, u.find_spec('benchmarks') is None)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
    done = subprocess.run([sys.executable, "-m", "jaxclp", "--help"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "reproduce" in done.stdout, done.stderr
