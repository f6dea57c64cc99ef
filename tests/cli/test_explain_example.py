"""docs/examples/explain_example.py (the worked example's generator) on a small synthetic graph: the page, the
figure and the numbers it writes."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_example_script_writes_page_figure_and_numbers(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "docs" / "examples" / "explain_example.py"), "--dataset",
                           "synthetic", "--out", str(tmp_path), "--epochs", "20"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "explain_example.md").read_text()
    r = json.loads((tmp_path / "explain_example.json").read_text())
    assert (tmp_path / "explain_example.png").read_bytes()[:4] == b"\x89PNG"
    assert r["nodes"] == 150 and r["known"] + r["arriving"] + r["test"] == r["labelled"] == 150
    assert len(r["sentences"]) == 3 and all(s in page for s in r["sentences"])
    assert "![The three nodes' neighbourhoods](explain_example.png)" in page
    for nd in r["explanations"]["nodes"] + r["explanations_after"]["nodes"]:  # complete to the solver's tolerance
        assert nd["completeness_gap"] < 1e-5
        for c in nd["per_class"]:
            assert abs(c["labelled_term"] + c["prior_term"] - c["score"]) < 1e-5 * max(1.0, c["score"])
    u = r["update"]
    assert u["train_after"] == r["explanations"]["model"]["num_train"] + r["arriving"]
    assert u["max_abs_warm_minus_cold"] < 1e-4 and len(u["iterations_warm"]) == 3
    assert f"{u['train_after']:,} labelled nodes" in page
