"""jaxclp.experiments.progress: the job's ETA from measured split times (a fake clock), in rounded words."""

import numpy as np
import pytest

from jaxclp.experiments import progress


class Clock:
    def __init__(self):
        self.t, self.compiled = 0.0, 0.0

    def __call__(self):
        return self.t


def _job(total=1, runs=10, methods=3):
    clock = Clock()
    job = progress.Job(total, runs * methods, clock=clock, compiled=lambda: clock.compiled)
    return job, clock


def _split(job, clock, seconds, compiling=0.0):
    job.split_start()
    clock.t += seconds
    clock.compiled += compiling
    job.split_end()


def test_eta_is_a_range_after_the_first_split_then_the_later_splits_median():
    """Split 1 compiles (40 of its 60 s): a later split takes 20-60 s, so 9 left are 3-9 min, a range; after split
    2 (20 s) one value, the later splits' median times the splits left; nothing before a split is done."""
    job, clock = _job()
    job.begin("g", "medium", 30, splits=10, methods=3)
    clock.t = 5.0  # the MLP priors
    job.split_start()
    clock.t = 35.0
    assert job.eta() is None and job.eta_text() is None  # during split 1: nothing measured yet
    clock.t, clock.compiled = 65.0, 40.0
    job.split_end()
    assert job.eta() == pytest.approx((9 * 20.0, 9 * 60.0))
    assert job.eta_text() == "about 3-9 min left"
    _split(job, clock, 20.0)
    assert job.eta() == pytest.approx((8 * 20.0, 8 * 20.0)) and job.eta_text() == "about 3 min left"
    job.split_start()  # split 3 runs for 10 s of its expected 20: 10 s + 7 splits x 20 s
    clock.t += 10.0
    assert job.eta() == pytest.approx((150.0, 150.0))
    clock.t += 10.0
    job.split_end()
    _split(job, clock, 100.0)  # one slow split: the median, not the mean
    assert job.later == [20.0, 20.0, 100.0] and job.eta()[0] == pytest.approx(6 * 20.0)


def test_later_units_cost_their_setup_first_split_and_other_splits():
    """A job of 2 graphs x 10 splits: after the first graph's split 1 (60 s, 40 compiling; setup 5 s) the second
    graph costs 5 + 60 + 9 later splits, the first graph's 9 splits left 20-60 s each."""
    job, clock = _job(total=2, runs=10, methods=2)
    job.begin("a", "medium", 20, splits=10, methods=2)
    clock.t = 5.0
    _split(job, clock, 60.0, compiling=40.0)
    low, high = job.eta()
    assert low == pytest.approx(65 + 18 * 20.0) and high == pytest.approx(65 + 18 * 60.0)
    for _ in range(9):
        _split(job, clock, 20.0)
    job.begin("b", "medium", 20, splits=10, methods=2)  # no unit after it
    assert job.eta() == pytest.approx((10 * 20.0, 10 * 20.0))


def test_eta_words_are_rounded():
    assert progress.eta_words(44, 44) == "about 40 s left"
    assert progress.eta_words(3, 8) == "about 10 s left"
    assert progress.eta_words(60, 180) == "about 1-3 min left"
    assert progress.eta_words(160, 170) == "about 3 min left"
    assert progress.eta_words(7000, 9000) == "about 2-2.5 h left"
    assert [progress._duration(s) for s in (45, 192, 7500)] == ["45s", "3m12s", "2h05m"]


def test_a_run_reports_its_splits_to_the_job(tmp_path, capsys):
    """runner.run inside job(): each split it computes is measured (one first split, the others later), and the
    line per finished graph names the whole job's ETA in words."""
    from jaxclp.datasets import load_file
    from jaxclp.experiments import runner

    rng = np.random.default_rng(0)
    y = np.arange(40) % 2
    edges = [(i, j) for i in range(40) for j in range(i + 1, 40) if rng.random() < (0.3 if y[i] == y[j] else 0.02)]
    (tmp_path / "e.csv").write_text("".join(f"{a},{b}\n" for a, b in edges))
    (tmp_path / "y.csv").write_text("".join(f"{i},{v}\n" for i, v in enumerate(y)))
    ds = load_file(tmp_path / "e.csv", labels=tmp_path / "y.csv")
    with progress.job(2, 3 * 1) as job:
        runner.run(ds, "medium", ["lp"], 3, tmp_path / "o", progress=True)
    assert len(job.first) == 1 and len(job.later) == 2 and job.splits_left == 0 and job.splits_per_unit == 3
    err = capsys.readouterr().err
    assert "done: 3 records in" in err and "; whole job: about " in err and " left" in err
