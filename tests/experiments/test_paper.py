"""The paper's numbers shipped as package data (jaxclp/data/paper_results.csv) and their name mapping."""

import csv
from pathlib import Path

import pytest

from jaxclp import datasets
from jaxclp.experiments.paper import DATASET_NAMES, paper_entry, paper_number, paper_rows

SHARED_CSV = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "paper_results.csv"


def test_csv_shape_and_columns():
    rows = paper_rows()
    assert len(rows) == 720
    assert set(rows[0]) == {"table", "split", "method", "dataset", "mean", "std", "note"}
    assert {r["table"] for r in rows} == {"heterophily", "homophily"}


@pytest.mark.skipif(not SHARED_CSV.exists(), reason="shared paper copy not present")
def test_shipped_csv_equals_shared_copy():
    with open(SHARED_CSV, newline="", encoding="utf-8") as f:
        assert tuple(csv.DictReader(f)) == paper_rows()


@pytest.mark.parametrize("dataset,split,method,expected", [
    # spot-checked against paper.tex
    ("coauthor-physics", "sparse", "clp", (95.19, 0.15)),   # homophily table, train ratio 5%
    ("coauthor-physics", "sparse", "clp_paper", (95.19, 0.15)),
    ("coauthor-cs", "sparse", "h2gcn", (92.16, 0.3)),
    ("acm+dagger", "dense", "clp", (93.62, 0.84)),           # CLP† row
    ("texas", "medium", "clp", (69.63, 3.75)),               # main table
    ("texas", "sparse", "clp", (60.81, 7.24)),               # appendix heterophily table
    ("wiki", "dense", "lp", (37.20, 1.55)),
    ("film", "medium", "mlp", (32.07, 0.72)),                # alias of actor
    ("Twitch_RU", "sparse", "clp", (52.51, 1.22)),
])
def test_paper_number(dataset, split, method, expected):
    assert paper_number(dataset, split, method) == pytest.approx(expected)


def test_missing_numbers_are_none():
    assert paper_number("texas", "medium", "clp_star") is None   # the paper has no CLP* row
    assert paper_number("acm", "medium", "clp") is None          # homophily table: sparse and dense only
    assert paper_number("minesweeper", "medium", "mlp") is None  # not in the paper
    assert paper_number("acm+dagger", "dense", "mlp") is None    # no MLP† row
    assert paper_entry("ogbn-proteins", "medium", "mlp")["note"].startswith("the paper cites")


def test_oom_is_none():
    assert paper_entry("ogbn-proteins", "medium", "h2gcn")["mean"] == "OOM"
    assert paper_number("ogbn-proteins", "medium", "h2gcn") is None
    assert paper_number("ogbn-proteins", "medium", "mlp") == (73.43, 0.12)


def test_dataset_names_map_to_registry():
    ours = set(datasets.available())
    unavailable = {"wikics", "ogbn-proteins"}  # not obtainable (see the datasets README)
    for paper_name, our_name in DATASET_NAMES.items():
        assert (our_name in ours) != (our_name in unavailable), paper_name
