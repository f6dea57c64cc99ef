"""The README and the documentation: their library examples run as written (data fetched through the file://
mirror of ../shared), the README keeps its shape (short, the hello-world on its first screen, the CI's own test
command), and the results pages' tables equal their rendering from the committed records."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "datasets"
README = REPO / "README.md"
GETTING_STARTED = REPO / "docs" / "getting-started.md"


def readme_block(section: str, index: int = 0, path: Path = README, lang: str = "python") -> str:
    """The ``index``-th ``lang`` block of the section ``## section`` of ``path`` (up to the next section)."""
    text = path.read_text()
    body = re.split(r"\n## ", text.split(f"\n## {section}\n", 1)[1], maxsplit=1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", body, re.S)[index]


def run_fresh(code: str, tmp_path) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh process (float32, as a user's; conftest turns x64 on here), data fetched through
    the file:// mirror of ../shared into ``tmp_path``; asserts it exits 0."""
    env = dict(os.environ, JAXCLP_DATA=str(tmp_path / "data"), JAXCLP_DATA_URL=SHARED.as_uri(),
               JAXCLP_CACHE=str(tmp_path / "parsed"))
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


STAGE_CHECKS = (
    "\nimport numpy as _np\n"
    "assert 0.3 < float((_np.asarray(model.predict()) == ds.labels)[test].mean()) <= 1.0\n"
    "assert bool(_np.all(_np.asarray(sol.converged))) and sol.value.shape == (ds.num_nodes, ds.num_classes)\n"
    "assert bool(info.converged)\n")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
def test_library_example_runs(tmp_path):
    """The README's hello-world (fit / predict) and its stages block, run one after the other as a reader would."""
    code = (readme_block("Library example")
            # the showcase shows propagation helping (issue: it showed alpha 0.1 and the MLP's own accuracy on Texas)
            + "assert model.alpha_ >= 0.5 and acc(model.predict()) > acc(model.prior_.argmax(1)), model.alpha_\n"
            + readme_block("The stages as functions") + STAGE_CHECKS)
    done = run_fresh(code, tmp_path)
    assert "test acc" in done.stdout and "alpha" in done.stdout and "converged True" in done.stdout


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
def test_getting_started_example_runs(tmp_path):
    """The getting-started page's fit (a grid of variants) and its stages block."""
    code = (readme_block("Fit and predict", path=GETTING_STARTED)
            + readme_block("The stages as functions", path=GETTING_STARTED) + STAGE_CHECKS)
    done = run_fresh(code, tmp_path)
    assert "test acc" in done.stdout and "rho" in done.stdout


def test_guide_examples_run(tmp_path):
    """The user guide's self-contained blocks: the worked example of your own graph (files written and read back)
    and the gradient through the solve (finite, not all zero)."""
    guide = REPO / "docs" / "guide"
    code = (readme_block("A worked example", path=guide / "own-graph.md")
            + "assert ds.num_nodes == 4 and list(ds.labels) == [0, 1, 0, 1]\n"
            + readme_block("Gradients through the solve", path=guide / "gradients.md")
            + "assert grad.shape == (300, 3) and bool(jnp.all(jnp.isfinite(grad))) and float(jnp.abs(grad).max()) > 0\n")
    done = run_fresh(code, tmp_path)
    assert "gradient (300, 3)" in done.stdout


def test_readme_shape():
    """At most 150 lines, the fit / predict example within the first 40, and the test command exactly .ci/run's."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    first_screen = "\n".join(lines[:40])
    example = readme_block("Library example")
    assert example in first_screen and ".fit(" in example and ".predict()" in example
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert len(ci) == 1, ci
    bash = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    assert ci[0] + "\n" in bash, "the README's test command differs from .ci/run's"
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links and [link for link in links if not link.startswith("http") and not (REPO / link).is_file()] == []


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
def test_library_extensions_example_runs(tmp_path):
    """The getting-started page's extensions block (prior=, spectral scaling, the authors' step, end-to-end
    training) runs as written, and what it prints is what its objects hold."""
    code = readme_block("Other base predictors, the authors' step, end-to-end training", path=GETTING_STARTED) + (
        "\nimport numpy as _np\n"
        "assert m.prior_name_ in ('mlp', 'link') and [n for n, _ in m.prior_val_scores_] == ['mlp', 'link']\n"
        "assert m.prior_val_scores_[['mlp', 'link'].index(m.prior_name_)][1] == max(s for _, s in m.prior_val_scores_)\n"
        "assert (m.alpha_ == 0.0) == (not m.propagated_)\n"
        "_np.testing.assert_allclose(_np.asarray(own.prior_), _np.asarray(m.prior_), rtol=1e-6)\n"
        "assert e2e.alpha in (0.5, 0.9) and e2e.beliefs.shape == (ds.num_nodes, ds.num_classes)\n"
        "assert 0.3 < float((_np.asarray(e2e.beliefs).argmax(1) == ds.labels)[test].mean()) <= 1.0\n")
    done = run_fresh(code, tmp_path)
    assert "end to end: alpha" in done.stdout and "propagated" in done.stdout


def _page_blocks():
    from benchmarks.page_blocks import BLOCKS

    return BLOCKS


def test_results_pages_match_the_records():
    """The generated result tables of the results pages (between ``<!-- jaxclp:NAME -->`` markers) equal their
    rendering from the committed records and benchmark results: numbers cannot be pasted by hand or drift
    (``python -m benchmarks.pages`` regenerates them)."""
    from benchmarks import pages as bench_pages
    from jaxclp.experiments import results_tables as tables

    pages = tables.pages(REPO)
    assert {p.name for p in pages} >= {"medium.md", "sparse-dense.md", "acm-dblp.md", "homophilous.md", "baselines.md"}
    text = "".join(p.read_text() for p in pages)
    for name in ("table2", "ablation", "table4-sparse", "table4-dense", "table_gnn", "clp-paired", "clp-paired-sparse",
                 "clp-paired-dense", "clp-paired-table5", "anchors", *tables.TABLES, *tables.PAIRED,
                 *tables.RECORD_BLOCKS, *_page_blocks()):
        assert text.count(f"<!-- jaxclp:{name} -->") == 1, name  # every table once, on some page
    from jaxclp.experiments.reproduce import GNN_METHODS

    assert tuple(m for m, _ in tables.TABLES["table_gnn"].columns) == GNN_METHODS  # the target's methods, in order
    src = bench_pages.sources(REPO)  # one reader for every page, as the command uses
    for page in pages:
        assert bench_pages.render(page.read_text(), REPO, src) == page.read_text(), (
            f"{page.name}: tables differ from results/: run python -m benchmarks.pages")
    assert "<!-- jaxclp:" not in README.read_text()  # the README shows no result table (the docs do)


def test_update_rewrites_a_drifted_page(tmp_path):
    """update() rewrites a page whose table was edited by hand back to the records' numbers, and --check notices."""
    from jaxclp.experiments import results_tables as tables

    page = REPO / tables.PAGES / "acm-dblp.md"
    (tmp_path / tables.PAGES).mkdir(parents=True)
    (tmp_path / "results").symlink_to(REPO / "results")
    drifted = tmp_path / tables.PAGES / "acm-dblp.md"
    good = page.read_text()
    row = next(line for line in good.splitlines() if line.startswith("| acm |"))
    drifted.write_text(good.replace(row, row.replace("| acm |", "| acm | 99.9 |", 1), 1))
    assert tables.main(["--root", str(tmp_path), "--check"]) == 1
    assert tables.update(root=tmp_path) == [drifted] and drifted.read_text() == good
    assert tables.main(["--root", str(tmp_path), "--check"]) == 0


def test_readme_table_cells_by_hand(tmp_path):
    """Cells, (n), ‡ for a stale method definition, bold only among complete current cells, base-prior counts."""
    import json

    from jaxclp.experiments import results_tables as tables
    from jaxclp.experiments.specs import method_hash

    def rec(method, run, test, stale=False, base=None):
        return {"type": "result", "dataset": "texas", "split": "medium", "method": method, "run": run,
                "test": test, "val": test, "params": {"base_prior": base} if base else {},
                "method_hash": "old" if stale else method_hash(method)}

    recs = [{"type": "header", "dataset": "texas", "split": "medium", "chance": [0.5, 0.5]},  # chance 50.0
            rec("mlp", 0, 0.50), rec("mlp", 1, 0.60), rec("clp", 0, 0.70, base="gcn"),  # clp: 1 of 2 runs
            rec("lp", 0, 0.90, stale=True), rec("lp", 1, 0.90, stale=True)]
    (tmp_path / "results" / "t").mkdir(parents=True)
    (tmp_path / "results" / "t" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    table = tables.Table("results/t", "medium", (("mlp", "MLP"), ("lp", "LP"), ("clp", "CLP")), paper="paper",
                         base_counts=True)
    tables.TABLES["_test"] = table
    try:
        text = "x\n<!-- jaxclp:_test -->\nold\n<!-- /jaxclp:_test -->\ny\n"
        out = tables.render(text, tmp_path)
    finally:
        del tables.TABLES["_test"]
    row = next(line for line in out.splitlines() if line.startswith("| texas"))
    # mlp 55.0 ± 7.1 is the only complete current cell: bold, and not above chance (50.0) by more than its std;
    # lp is stale (‡, never bold); clp has 1 of 2 runs
    assert row == "| texas | 50.0 | **55.0 ± 7.1** ≤ chance | 90.0 ± 0.0 ‡ | 70.0 (1) (GCN 1) | 69.6 ± 3.8 |"
    assert out.startswith("x\n<!-- jaxclp:_test -->\n| dataset | chance | MLP | LP | CLP | paper |") and out.endswith(
        f"\n\n{tables.CHANCE_LEGEND}\n<!-- /jaxclp:_test -->\ny\n")
    # a table stopped part-way: with the protocol's run count every cell below it says (n), and none is bold
    tables.TABLES["_test"] = table._replace(runs=3, paper="", base_counts=False)
    try:
        out = tables.render(text, tmp_path)
    finally:
        del tables.TABLES["_test"]
    row = next(line for line in out.splitlines() if line.startswith("| texas"))
    assert row == "| texas | 50.0 | 55.0 ± 7.1 (2) ≤ chance | 90.0 ± 0.0 (2) ‡ | 70.0 (1) |"
    # without the header's chance: chance.json beside the records gives it; without either, '?' and no marker
    config = {"dataset": "texas", "split": "medium", "seed": 0}  # what chance.json's rows are keyed by (its hash)
    (tmp_path / "results" / "t" / "results.jsonl").write_text(
        "".join(json.dumps(r | {"config": config, "config_hash": "h"}) + "\n" for r in recs[1:]))
    tables.TABLES["_test"] = table._replace(paper="", base_counts=False)
    try:
        unknown = tables.render(text, tmp_path)
        (tmp_path / "results" / "t" / "chance.json").write_text(json.dumps({"rows": [
            {"dataset": "texas", "split": "medium", "config_hash": "h", "chance": {"0": 0.1, "1": 0.1}}]}))
        stored = tables.render(text, tmp_path)
    finally:
        del tables.TABLES["_test"]
    assert "| texas | ? | **55.0 ± 7.1** | 90.0 ± 0.0 ‡ | 70.0 (1) |" in unknown and "?: unknown" in unknown
    assert "| texas | 10.0 | **55.0 ± 7.1** | 90.0 ± 0.0 ‡ | 70.0 (1) |" in stored
    with pytest.raises(ValueError, match="names no table"):
        tables.render("<!-- jaxclp:nope -->\n<!-- /jaxclp:nope -->", tmp_path)


def test_paired_block_merges_targets_on_the_same_splits_only():
    """The clp-paired block: clp of the first folder against baselines of both; a second folder's records count only
    where its configuration equals the first's for that dataset, never for a method the first already has; a row
    whose clp records are stale (another definition of clp) is kept and marked ‡, the other methods' stale records
    are left out."""
    from jaxclp.experiments import results_tables as tables
    from jaxclp.experiments.specs import method_hash

    def rec(dataset, method, run, test, cfg="c1", stale=False, base=None):
        return {"type": "result", "dataset": dataset, "split": "medium", "method": method, "run": run, "test": test,
                "val": test, "params": {"base_prior": base} if base else {}, "config_hash": cfg,
                "method_hash": "old" if stale else method_hash(method)}

    first = [rec(d, m, i, t) for d in ("a", "b") for i in range(3)
             for m, t in (("mlp", 0.50 + 0.01 * i), ("clp", 0.60 + 0.02 * i))]
    first += [rec("c", "clp", 0, 0.9, stale=True), rec("c", "mlp", 0, 0.4), rec("c", "link", 0, 0.95, stale=True)]
    second = [rec("a", "sage", i, 0.70) for i in range(3)]  # same config as a's: the best baseline of a
    second += [rec("b", "sage", i, 0.99, cfg="c2") for i in range(3)]  # other splits / settings: ignored
    second += [rec("a", "mlp", i, 0.99) for i in range(3)]  # the first folder has a's mlp: ignored
    out = tables.paired_markdown([first, second], tables.Paired(("x", "y"), "medium"))
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in out.splitlines()[2:]}
    assert set(rows) == {"a", "b", "c ‡"}  # c's clp is stale: kept, marked
    assert rows["c ‡"][2:4] == ["90.0", "+50.0 (1/0/0)"] and rows["c ‡"][6] == "mlp 40.0"  # stale link: out
    assert rows["a"][2] == "62.0" and rows["a"][3] == "+11.0 ± 1.0 (3/0/0)"  # vs its own mlp, not the second's
    assert rows["a"][6] == "sage 70.0" and rows["a"][7] == "-8.0 ± 2.0 (0/3/0)" and rows["a"][8] == "no |"
    assert rows["b"][6] == "mlp 51.0" and rows["b"][8] == "yes |"
    assert tables.paired_markdown([[rec("a", "link", 0, 0.5, stale=True)]], tables.Paired(("x",), "medium")) == "–"
    # a tuple of splits: one row per (dataset, split), each paired within its own split only
    other = [dict(r, split="dense", test=r["test"] - 0.1) for r in first if r["dataset"] == "a"]
    out = tables.paired_markdown([first + other], tables.Paired(("x",), ("medium", "dense")))
    rows = {tuple(line.split(" | ")[:2]): line.split(" | ") for line in out.splitlines()[2:]}
    assert set(rows) == {("| a", "dense"), ("| a", "medium"), ("| b", "medium"), ("| c ‡", "medium")}
    assert rows["| a", "dense"][2] == "52.0" and rows["| a", "dense"][3] == "+11.0 ± 1.0 (3/0/0)"
    assert tables.paired_markdown([first + other], tables.Paired(("x",), "dense")).count("| a | dense |") == 1
