"""``jaxclp explain``: words, JSON (complete and deterministic) and one-line errors, on a small edge list."""

import json

import numpy as np
import pytest

from jaxclp.experiments import cli
from files import explain_files


def _files(tmp_path, labelled=True):
    return explain_files(tmp_path, labelled)


def test_cli_explain_words_json_complete_deterministic(tmp_path, capsys):
    args = _files(tmp_path) + ["--node", "n3", "--node", "n20", "--top", "3", "--epochs", "30", "--priors", "mlp"]
    docs = []
    for i in range(2):
        assert cli.main(args + ["--json", str(tmp_path / f"out{i}.json")]) == 0
        docs.append((tmp_path / f"out{i}.json").read_text())
    assert docs[0] == docs[1]  # two runs: the same explanation
    out = capsys.readouterr().out
    assert "node n3 is class " in out and "from the prior (mlp)" in out and "labelled node" in out
    doc = json.loads(docs[0])
    assert doc["model"]["propagated"] and doc["model"]["alpha"] > 0 and doc["classes"] == ["ant", "bee", "cat"]
    assert [nd["node"] for nd in doc["nodes"]] == ["n3", "n20"]
    for nd in doc["nodes"]:
        assert nd["predicted"] in doc["classes"] and nd["completeness_gap"] < 1e-5
        assert nd["predicted"] == doc["classes"][int(np.argmax(nd["scores"]))]
        for k, c in enumerate(nd["per_class"]):
            assert c["score"] == nd["scores"][k] and len(c["contributions"]) <= 3
            listed = sum(e["contribution"] for e in c["contributions"])
            assert listed + c["other_labelled"] == pytest.approx(c["labelled_term"], abs=1e-9)
            assert c["labelled_term"] + c["prior_term"] == pytest.approx(c["score"], rel=1e-5)  # completeness
            shares = [e["contribution"] for e in c["contributions"]]
            assert shares == sorted(shares, reverse=True) and min(shares, default=0) >= 0
            assert all(e["label"] in doc["classes"] and e["hops"] >= 0 for e in c["contributions"])
    # --top 0 lists every labelled node with a share
    assert cli.main(args + ["--top", "0", "--json", str(tmp_path / "all.json")]) == 0
    for c in json.loads((tmp_path / "all.json").read_text())["nodes"][0]["per_class"]:
        assert c["other_labelled"] == pytest.approx(0.0, abs=1e-12) and len(c["contributions"]) == c["num_labelled"]


def test_cli_explain_errors(tmp_path, capsys):
    args = _files(tmp_path) + ["--epochs", "5"]
    assert cli.main(args + ["--node", "nope"]) == 2
    err = capsys.readouterr().err
    assert "jaxclp: error: --node nope: no such node" in err and len(err.strip().splitlines()) == 1
    unlabelled = tmp_path / "u"
    unlabelled.mkdir()
    assert cli.main(_files(unlabelled, labelled=False) + ["--node", "n1"]) == 2
    assert "jaxclp: error:" in capsys.readouterr().err
