"""The documentation site builds in strict mode, and its API reference covers every public name.

``mkdocs build --strict`` fails on any warning: a broken link or anchor (between pages, into the served
``benchmarks/results/`` and ``results/`` files), a docstring griffe cannot parse, an API entry (``::: name``) that
does not resolve. mkdocstrings has no warning for a missing docstring, so the second test checks that every name of
``jaxclp.__all__`` has one (read as the docs read it, by griffe: a constant's docstring is the string below its
assignment) and has its own ``:::`` entry in ``docs/api/``.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(site)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    # the build really rendered the API from the docstrings and served the committed results
    solve_page = (site / "api" / "pipeline" / "index.html").read_text()
    assert 'id="jaxclp.solve.solve"' in solve_page and "relative_residual" in solve_page
    assert (site / "benchmarks" / "results" / "solvers" / "index.html").is_file()
    assert (site / "results" / "table2" / "summary" / "index.html").is_file()


def api_entries() -> set[str]:
    """The dotted paths of every ``::: path`` entry of the API reference pages."""
    return {m for page in (REPO / "docs" / "api").glob("*.md")
            for m in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.M)}


def test_every_public_name_is_documented_in_the_api_reference():
    import griffe

    import jaxclp

    entries = api_entries()
    package = griffe.load("jaxclp", search_paths=[str(REPO / "src")], resolve_aliases=True)  # as mkdocs.yml
    missing_entry, missing_doc = [], []
    for name in jaxclp.__all__:
        obj = getattr(jaxclp, name)
        module = getattr(obj, "__module__", None) or ""
        # an entry names it from the package (jaxclp.CLP) or from its defining module, where a submodule of the
        # same name shadows it in griffe's view of the package (jaxclp.solve.solve)
        if not ({f"jaxclp.{name}", f"{module}.{name}", f"jaxclp.{name}.{name}"} & entries):
            missing_entry.append(name)
        member = package[name]
        target = member.final_target if member.is_alias else member
        if target.is_module and not isinstance(obj, type(jaxclp)):  # jaxclp.solve: griffe sees the submodule
            target = target[name]
            target = target.final_target if target.is_alias else target
        if not (target.docstring and target.docstring.value.strip()):
            missing_doc.append(name)
    assert not missing_entry, f"public names without a '::: jaxclp.NAME' entry under docs/api/: {missing_entry}"
    assert not missing_doc, f"public names without a docstring: {missing_doc}"


def test_the_coverage_check_can_fail(tmp_path):
    """The check above reads real entries: a page without an entry for ``jaxclp.solve`` leaves it out."""
    entries = api_entries()
    assert "jaxclp.solve.solve" in entries and "jaxclp.CLP" in entries
    assert "jaxclp.solve" not in entries  # the module of that name, which would render the whole module


def test_pages_are_not_a_lab_notebook():
    """The README and the written pages carry no session or revision markers and no commit hashes (history lives
    in git; the served benchmark and record files keep their own provenance)."""
    marker = re.compile(r"\bsession \d+|\brevision \d+|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", re.I)
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    found = {p.relative_to(REPO).as_posix(): marker.findall(p.read_text()) for p in pages}
    assert {p: m for p, m in found.items() if m} == {}
    assert marker.search("as of session 21") and marker.search("at commit 575f0ff") and not marker.search("a 1e6 run")
