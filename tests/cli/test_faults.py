"""Fault injection: kill -9 at random points of a ``jaxclp run``, concurrent runs on one folder,
a configuration change between runs, corrupted raw and processed files. Each asserts that no record is lost,
duplicated, torn or stale.

The runs are real ``python -m jaxclp run`` processes on Texas (183 nodes; methods mlp, lp; 2 runs; 5 epochs)
fetched from the ``file://`` mirror of ../shared/datasets, sharing one persistent XLA cache so that only the
first process compiles. Bounded to about a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jaxclp import datasets as D
from jaxclp.experiments import cli, identity, records

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "datasets"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
ARGS = ["run", "--dataset", "texas", "--methods", "mlp,lp", "--runs", "2", "--epochs", "5", "--no-progress"]
KEYS = sorted(("texas", "medium", i, m) for i in (0, 1) for m in ("lp", "mlp"))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("faults")
    return dict(os.environ, JAXCLP_DATA=str(base / "data"), JAXCLP_DATA_URL=SHARED.as_uri(),
                JAXCLP_CACHE=str(base / "parsed"), JAXCLP_XLA_CACHE=str(base / "xla"), PYTHONUNBUFFERED="1")


def _start(env, out, *extra):
    return subprocess.Popen([sys.executable, "-m", "jaxclp", *ARGS, "--out", str(out), *extra], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(p, timeout=300):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def _check_folder(out) -> list[dict]:
    """Every line a whole JSON record, every key exactly once, one configuration."""
    lines = (Path(out) / records.RESULTS_FILE).read_text().splitlines()
    recs = [json.loads(line) for line in lines]  # raises on a torn line
    res = [r for r in recs if r["type"] == "result"]
    keys = sorted((r["dataset"], r["split"], r["run"], r["method"]) for r in res)
    assert keys == KEYS, keys  # nothing lost, nothing duplicated
    assert len({r["config_hash"] for r in res}) == 1  # nothing stale
    assert all(identity.config_hash(r["config"]) == r["config_hash"] for r in res)
    return res


@pytest.fixture(scope="module")
def reference(env, tmp_path_factory):
    """One uninterrupted run (it also fills the data root, the parse cache and the XLA cache)."""
    out = tmp_path_factory.mktemp("reference")
    rc, _, err = _finish(_start(env, out))
    assert rc == 0, err[-2000:]
    return {(r["run"], r["method"]): r for r in _check_folder(out)}


def test_kill9_at_random_points_then_resume(env, reference, tmp_path):
    """kill -9 at a random point of the check-and-run (one folder per seed, the seeds in parallel), then
    resume: every key exactly once, whole lines, the configuration of an uninterrupted run, and LP's
    numbers equal to it."""
    procs = {}
    for seed in (0, 1):
        out = tmp_path / f"out{seed}"
        procs[seed] = (_start(env, out), out, np.random.default_rng(seed).uniform(0.0, 2.5))
    t0 = time.monotonic()
    while any(p.poll() is None and not (out / records.LOCK_FILE).exists() for p, out, _ in procs.values()):
        assert time.monotonic() - t0 < 240
        time.sleep(0.05)
    t_lock = time.monotonic()
    for p, _, delay in sorted(procs.values(), key=lambda v: v[2]):  # kill each at its own random delay
        time.sleep(max(0.0, t_lock + delay - time.monotonic()))
        p.send_signal(signal.SIGKILL)
    for p, _, _ in procs.values():
        p.communicate()
    resumed = [_start(env, out) for _, out, _ in procs.values()]
    for p in resumed:
        rc, _, err = _finish(p)
        assert rc == 0, err[-2000:]
    same = reference[(0, "mlp")]["config_hash"]
    for _, out, _ in procs.values():
        res = _check_folder(out)
        assert {r["config_hash"] for r in res} == {same}
        for r in res:
            ref = reference[(r["run"], r["method"])]
            if r["method"] == "lp":  # deterministic: the resumed record is the uninterrupted run's
                assert r["params"] == ref["params"]
                assert abs(r["test"] - ref["test"]) < 1e-6 and abs(r["val"] - ref["val"]) < 1e-6


@pytest.mark.slow  # ~20 s of subprocess runs; kill -9 + resume stays in CI (benchmarks/slow_tests.py)
def test_concurrent_runs_then_configuration_change(env, reference, tmp_path):
    """Two identical runs on one folder, both started while the folder is locked (so both are in the
    check-and-run at once): each key is written once; the second waits for the first and skips its keys
    (without the lock: 36 results for 18 keys). Then another --epochs is refused in one line with exit 2,
    and --replace-stale moves the old records to results.stale.jsonl and recomputes."""
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / records.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    procs = []
    try:
        for name in ("a", "b"):
            err = open(tmp_path / f"{name}.err", "w+")
            procs.append((subprocess.Popen([sys.executable, "-m", "jaxclp", *ARGS, "--out", str(out)], cwd=REPO,
                                           env=env, stdout=subprocess.DEVNULL, stderr=err), err))
        t0 = time.monotonic()  # both are waiting for the lock: they passed every check before it
        while not all("waiting" in (tmp_path / f"{n}.err").read_text() for n in ("a", "b")):
            assert all(p.poll() is None for p, _ in procs), [e.name for _, e in procs]
            assert time.monotonic() - t0 < 240
            time.sleep(0.1)
    finally:
        os.close(fd)  # releases the lock
    for p, err in procs:
        assert p.wait(timeout=300) == 0, (tmp_path / Path(err.name).name).read_text()[-2000:]
        err.close()
    _check_folder(out)
    before = (out / records.RESULTS_FILE).read_text()
    rc, _, err = _finish(_start(env, out, "--epochs", "6"))
    assert rc == 2 and err.startswith("jaxclp: error: ") and err.count("\n") == 1, err[-2000:]
    assert "another configuration" in err and "--replace-stale" in err and "epochs: 5 -> 6" in err
    assert (out / records.RESULTS_FILE).read_text() == before
    rc, _, err = _finish(_start(env, out, "--epochs", "6", "--replace-stale"))
    assert rc == 0, err[-2000:]
    res = _check_folder(out)
    assert {r["config"]["train"]["epochs"] for r in res} == {6}
    stale = records.read_records(out / records.STALE_FILE)
    assert sorted((r["dataset"], r["split"], r["run"], r["method"]) for r in stale) == KEYS
    assert {r["config"]["train"]["epochs"] for r in stale} == {5}


def test_torn_last_line_is_isolated(tmp_path):
    """A results file that lost the end of its last line (a crash mid-write on a filesystem without atomic
    appends) does not glue the next record onto the torn one: the runner ends it with a newline first."""
    path = tmp_path / records.RESULTS_FILE
    records.append_record(path, {"type": "result", "x": 1})
    with open(path, "a") as f:
        f.write('{"type": "result", "x": ')  # torn
    records._repair_tail(path)
    records.append_record(path, {"type": "result", "x": 2})
    assert [r["x"] for r in records.read_records(path)] == [1, 2]


def _copy_texas(root):
    spec = D.REGISTRY["texas"]
    for fs in spec.files.values():
        (root / fs.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED / fs.path, root / fs.path)
    return spec


def test_corrupted_raw_file_is_refused(tmp_path, monkeypatch, capsys):
    """One flipped byte in a raw file: a one-line checksum error naming the file, exit 2, no record."""
    monkeypatch.setenv("JAXCLP_CACHE", str(tmp_path / "parsed"))
    root = tmp_path / "data"
    spec = _copy_texas(root)
    victim = root / sorted(fs.path for fs in spec.files.values())[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    out = tmp_path / "out"
    assert cli.main(ARGS + ["--data-root", str(root), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxclp: error: sha256 mismatch for ") and victim.name in err and err.count("\n") == 1
    assert not (out / records.RESULTS_FILE).exists()


def test_corrupted_or_foreign_processed_cache_is_rebuilt(tmp_path):
    """A truncated cache entry, and a valid entry of another dataset placed under Texas's key,
    are not served: the loader warns and rebuilds from the raw files."""
    root = tmp_path / "data"
    _copy_texas(root)
    _copy_cornell = D.REGISTRY["cornell"]
    for fs in _copy_cornell.files.values():
        (root / fs.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED / fs.path, root / fs.path)
    cache = tmp_path / "parsed"
    truth = D.load("texas", root=root, download=False, cache=False)
    D.load("texas", root=root, download=False, cache=cache)
    D.load("cornell", root=root, download=False, cache=cache)
    (texas_entry,) = cache.glob("texas-*.npz")
    (cornell_entry,) = cache.glob("cornell-*.npz")

    def same(ds):
        return (np.array_equal(ds.labels, truth.labels) and ds.num_nodes == truth.num_nodes
                and np.array_equal(np.asarray(ds.graph.senders), np.asarray(truth.graph.senders)))

    shutil.copy(cornell_entry, texas_entry)  # same n = 183, other labels and edges
    with pytest.warns(UserWarning, match="ignoring damaged processed cache.*written as 'cornell-"):
        ds = D.load("texas", root=root, download=False, cache=cache)
    assert same(ds)
    assert same(D.load("texas", root=root, download=False, cache=cache))  # the rebuilt entry is served
    texas_entry.write_bytes(texas_entry.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="ignoring damaged processed cache"):
        ds = D.load("texas", root=root, download=False, cache=cache)
    assert same(ds)
