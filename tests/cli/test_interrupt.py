"""Ctrl-C and SIGTERM during ``jaxclp run``: one line, exit 130 within seconds, the finished records
kept with their summary.md, no traceback; the same command then says what it reuses and computes the rest."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jaxclp.experiments import records

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^jaxclp: interrupted: (\d+) records kept in (.+); run the same command to resume$")
RESUME = re.compile(r"reusing (\d+) records in .*, computing (\d+)")


def _graph(tmp_path, n=120):
    """A 3-class edge list with homophilous edges, every node labelled."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n)
    e = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < (0.08 if y[i] == y[j] else 0.01)]
    (tmp_path / "e.csv").write_text("".join(f"{a},{b}\n" for a, b in e))
    (tmp_path / "y.csv").write_text("".join(f"{i},{v}\n" for i, v in enumerate(y)))


def _wait_for(predicate, proc, timeout, what):
    t0 = time.monotonic()
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"the command ended (rc {proc.returncode}) before {what}")
        if time.monotonic() - t0 > timeout:
            proc.kill()
            pytest.fail(f"no {what} after {timeout} s")
        time.sleep(0.2)


def _results(out):
    return [r for r in records.read_records(out / records.RESULTS_FILE) if r.get("type") == "result"]


def _stop(proc, sig, err_path):
    """Sends ``sig``, returns (seconds to exit, exit status, stderr's last line, stderr)."""
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running 60 s after signal {sig}")
    seconds = time.monotonic() - t0
    err = err_path.read_text()
    return seconds, rc, err.strip().splitlines()[-1], err


def test_interrupt_keeps_records_writes_summary_and_resumes(tmp_path):
    _graph(tmp_path)
    out = tmp_path / "out"
    # lp's records come first in each split, clp_mlp's grid takes seconds: the signal lands inside a computation
    cmd = [sys.executable, "-m", "jaxclp", "run", "--graph", str(tmp_path / "e.csv"), "--labels",
           str(tmp_path / "y.csv"), "--methods", "lp,clp_mlp", "--runs", "20", "--epochs", "5", "--out", str(out)]
    env = dict(os.environ, JAXCLP_XLA_CACHE="off", JAXCLP_TRACEBACK="")
    env.pop("JAXCLP_TRACEBACK")
    err1 = tmp_path / "err1.txt"
    with open(err1, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=f)
        _wait_for(lambda: len(_results(out)) >= 1, proc, 300, "first record")
        seconds, rc, last, err = _stop(proc, signal.SIGINT, err1)
    kept = _results(out)
    assert rc == 130, err[-2000:]
    assert seconds < 5.0, seconds  # was ~95 s of computing on, after a 40-line traceback
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    m = LINE.match(last)
    assert m is not None, last
    assert int(m.group(1)) == len(kept) >= 1 and m.group(2) == str(out)
    assert all(r["method"] in ("lp", "clp_mlp") and np.isfinite(r["test"]) for r in kept)
    summary = (out / "summary.md").read_text()
    assert "| e | medium | accuracy |" in summary and "lp" in summary

    # the same command: it says what it reuses (every kept record) and what it computes, then SIGTERM stops it
    err2 = tmp_path / "err2.txt"
    with open(err2, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=f)
        _wait_for(lambda: RESUME.search(err2.read_text()) is not None, proc, 300, "resume line")
        seconds, rc, last, err = _stop(proc, signal.SIGTERM, err2)
    reused, computing = map(int, RESUME.search(err).groups())
    assert (reused, computing) == (len(kept), 2 * 20 - len(kept))
    assert rc == 130 and seconds < 5.0 and "Traceback" not in err
    m = LINE.match(last)
    assert m is not None and int(m.group(1)) == len(_results(out)) >= len(kept), last
    assert [r["run"] for r in _results(out)][:len(kept)] == [r["run"] for r in kept]  # nothing rewritten or torn


def test_interruptible_restores_the_signal_handlers():
    """In-process use (tests, notebooks): the handlers and the wakeup fd in place before are back afterwards."""
    from jaxclp.experiments import cli

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with cli._interruptible():
        assert signal.getsignal(signal.SIGINT) is not before[0]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert signal.set_wakeup_fd(-1) == -1  # none left installed


def test_interrupted_predict_says_nothing_was_written(tmp_path):
    _graph(tmp_path)
    out = tmp_path / "pred.csv"
    cmd = [sys.executable, "-m", "jaxclp", "predict", "--graph", str(tmp_path / "e.csv"), "--labels",
           str(tmp_path / "y.csv"), "--method", "clp_mlp", "--epochs", "5", "--out", str(out)]
    err_path = tmp_path / "err.txt"
    with open(err_path, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, JAXCLP_XLA_CACHE="off"),
                                stdout=subprocess.DEVNULL, stderr=f)
        _wait_for(lambda: "jaxclp: fitting clp_mlp" in err_path.read_text(), proc, 300, "fitting line")
        seconds, rc, last, err = _stop(proc, signal.SIGINT, err_path)
    assert rc == 130 and seconds < 5.0 and "Traceback" not in err, err[-2000:]
    assert last == "jaxclp: interrupted: nothing was written (predict writes its files at the end)"
    assert not out.exists() and not out.with_suffix(".json").exists()
