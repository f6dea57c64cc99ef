"""Inline generated numbers of the pages (jaxclp.experiments.page_values), on hand-made records and results."""

import json

import numpy as np
import pytest

from jaxclp.experiments import page_values as pv
from jaxclp.experiments.paper import paper_number


def _records(tmp_path):
    rec = lambda method, run, test, dataset="texas": {"type": "result", "dataset": dataset, "split": "medium",
                                                      "method": method, "run": run, "test": test, "val": test}
    recs = [rec("mlp", 0, 0.60), rec("mlp", 1, 0.70), rec("mlp", 1, 0.80),  # run 1 twice: the last record counts
            rec("clp", 0, 0.50), rec("clp", 1, 0.50)]
    (tmp_path / "results" / "t").mkdir(parents=True)
    (tmp_path / "results" / "t" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (tmp_path / "b.json").write_text(json.dumps({"rows": [{"s": 12.345, "case": "a"}, {"s": 7.0, "case": "b"},
                                                             {"s": 1.0, "case": "b"}], "n": 3}))
    return pv.Sources(tmp_path)


def test_values_by_hand(tmp_path):
    src = _records(tmp_path)
    assert pv.value("mean:t:medium:texas:mlp", src) == "70.0"  # (60 + 80) / 2
    assert pv.value("std:t:medium:texas:mlp:.2f", src) == f"{np.std([60, 80], ddof=1):.2f}" == "14.14"
    paper = paper_number("texas", "medium", "mlp")
    assert pv.value("paper:medium:texas:mlp", src) == f"{paper[0]:.1f}"
    assert pv.value("paperstd:medium:texas:mlp:.2f", src) == f"{paper[1]:.2f}"
    diff = 50.0 - paper_number("texas", "medium", "clp")[0]
    assert diff < 0 and pv.value("diff:t:medium:texas:clp", src) == f"{diff:+.1f}".replace("-", "−")
    assert pv.value("json:b.json:rows.0.s:.1f", src) == "12.3" and pv.value("json:b.json:n", src) == "3"
    assert pv.value("json:b.json:rows[case=a].s:.2f", src) == "12.35"  # found by content, not position
    assert pv.value("json:b.json:rows[case=b,s=1.0].s:.1f", src) == "1.0"  # several conditions


def test_a_signed_zero_has_no_sign():
    src = pv.Sources(".")
    pv.FACTS["_tiny"] = lambda s: -0.04
    try:
        assert pv.value("fact:_tiny:+.1f", src) == "0.0" and pv.value("fact:_tiny:+.2f", src) == "−0.04"
    finally:
        del pv.FACTS["_tiny"]


def test_render_rewrites_a_drifted_number_and_keeps_the_rest(tmp_path):
    src = _records(tmp_path)
    page = "MLP <!-- n:mean:t:medium:texas:mlp -->99.9<!-- /n --> and <!-- n:json:b.json:rows.1.s:.0f --><!-- /n -->."
    assert pv.render(page, src) == ("MLP <!-- n:mean:t:medium:texas:mlp -->70.0<!-- /n --> and "
                                    "<!-- n:json:b.json:rows.1.s:.0f -->7<!-- /n -->.")


@pytest.mark.parametrize("key, message", [
    ("median:t:medium:texas:mlp", "unknown kind"),
    ("mean:t:medium:texas", "takes 4 arguments"),
    ("mean:t:medium:wiki:mlp", "no medium records of mlp on wiki"),
    ("json:b.json:rows.5.s", "has no 'rows.5.s'"),
    ("fact:nonsense", "unknown fact"),
    ("json:b.json:rows[case=b].s", "2 elements of rows have case=b"),
])
def test_a_key_without_a_source_says_so(tmp_path, key, message):
    with pytest.raises(ValueError, match=message):
        pv.value(key, _records(tmp_path))


def test_the_committed_facts_count_the_tables_cells():
    """The table2 counts the results pages quote: every cell with a paper number is in the count, and the flagged
    ones are those whose difference exceeds the combined spread (as the summaries' ⚠)."""
    from pathlib import Path

    src = pv.Sources(Path(__file__).resolve().parents[2])
    cells, flagged = pv._paper_flags(src)
    agg, _ = src.scores("table2")
    with_paper = [k for k in agg if k[1] == "medium" and paper_number(k[0], "medium", k[2]) is not None]
    assert cells == len(with_paper) and 0 < flagged < cells
    n, within, lower = pv._clp_paper_vs_paper(src)
    assert n == sum(k[2] == "clp_paper" for k in with_paper) and within <= n and lower <= n
    # clp's closed-form choices (linear, neither per-step L1 nor spectrally scaled) and the "none" ones among them
    _, last = src.scores("table2")
    chosen = [r["params"] for k, r in last.items() if k[2] == "clp" and k[1] == "medium"]
    kinds = [(p.get("normalization"), p.get("l1")) for p in chosen]
    closed = [n for n, l1 in kinds if l1 is False and n in ("sym", "row", "none")]
    assert pv._clp_closed_choices(src) == (closed.count("none"), len(closed))
    assert len(closed) < sum(l1 is not None for _, l1 in kinds)  # the L1 and spectral choices are not counted


_MEASUREMENT = __import__("re").compile(
    r"(?<![\w.])\d+(?:\.\d+)?(?:[-–]\d+(?:\.\d+)?)?\s?(?:s|ms|min|h|%|GiB|GB|MiB|MB|x|×|points?)(?![\w])")
# Numbers with a unit that are settings, targets, data facts or hardware, not measurements (page -> the matches
# allowed there). A measured figure belongs in a results file and reaches the page through page_values.
_NOT_MEASURED = {
    "README.md": {"60 s", "25 %"},  # 25 %: the shape buckets' largest padding (jaxclp.buckets.MANTISSAS)
    "docs/api/index.md": {"5 %", "3.3 GiB", "256 MiB", "28281 ×"},
    "docs/benchmarks/index.md": {"600 s", "30 min", "60 min", "20 s", "60 s", "2 min", "4 GiB", "1 GiB", "10x", "3x", "2x",
                                 "0.8×", "1.3×", "2×", "24 GB", "0.2 s"},
    "docs/guide/explain.md": {"1%"},
    "docs/guide/explain_example.md": {"1%", "10.0%", "50.0%"},  # the example's settings: shares of the labels
    "docs/guide/gpu.md": {"18333 ×"},
    "docs/guide/own-graph.md": {"4 GiB", "25 %"},
    "docs/guide/priors.md": {"30 %"},
    "docs/guide/sharding.md": {"5×", "0.1×", "0.2×", "0.5×", "23.5 GiB", "2 ×"},
    "docs/results/baselines.md": {"1000×", "10 %", "50 %"},
    "docs/results/figures.md": {"5 %"},
    "docs/results/homophilous.md": {"5 %"},
    "docs/results/medium.md": {"1.0 point"},
    "docs/results/paper.md": {"3.5 GB", "20.0 %", "5 %"},
    "docs/results/sparse-dense.md": {"48 %", "5 %"},
}


def _prose(text: str) -> str:
    """``text`` without generated tables and values, code and link targets: what a person wrote by hand."""
    import re

    text = re.sub(r"<!-- jaxclp:([\w-]+) -->.*?<!-- /jaxclp:\1 -->", "", text, flags=re.S)
    text = re.sub(r"<!-- n:.+? -->[^<]*<!-- /n -->", "", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def test_no_measurement_is_copied_by_hand():
    """Every measured figure (a number with a unit of time, memory, share or ratio) in the README and the docs is
    generated (a table block or an inline value); the settings and targets that remain are listed above."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    found = {}
    for page in pages:
        name = page.relative_to(repo).as_posix()
        hits = {m.group(0) for m in _MEASUREMENT.finditer(_prose(page.read_text()))}
        extra = {h for h in hits if h not in _NOT_MEASURED.get(name, set())}
        if extra:
            found[name] = sorted(extra)
    assert found == {}, f"hand-written measurements (generate them: jaxclp.experiments.page_values): {found}"
    assert _MEASUREMENT.search(_prose("took 12.5 s")) and not _MEASUREMENT.search(
        _prose("took <!-- n:fact:x -->12.5<!-- /n --> s"))
