"""The ``jaxclp`` command: it only parses the config and calls the orchestrator (same records as
``runner.run``), writes the summary, and turns on JAX's persistent compilation cache for run/reproduce."""

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxclp.experiments import cli, identity, progress, records, runner
from jaxclp.experiments.analyses.common import last_results
from jaxclp.datasets import load_file
from jaxclp.datasets.fetch import user_cache_dir
from reference import host_devices_env

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "datasets"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
ARGS = ["run", "--dataset", "texas", "--methods", "mlp,clp_paper", "--runs", "2", "--epochs", "5", "--no-progress"]


def test_xla_cache_dir_resolution(tmp_path):
    assert cli.xla_cache_dir({}) == user_cache_dir() / "xla"
    assert cli.xla_cache_dir({"JAXCLP_XLA_CACHE": str(tmp_path)}) == tmp_path
    for off in ("off", "OFF", "0", "none", "", "false"):
        assert cli.xla_cache_dir({"JAXCLP_XLA_CACHE": off}) is None


@needs_shared
def test_cli_run_equals_runner_and_writes_summary(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAXCLP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("JAXCLP_DATA_URL", SHARED.as_uri())
    assert cli.main(ARGS + ["--out", str(tmp_path / "cli")]) == 0
    summary = tmp_path / "cli" / "summary.md"
    assert capsys.readouterr().out.strip().splitlines()[-2:] == [str(summary), str(summary.with_suffix(".png"))]
    text = summary.read_text()
    assert "texas" in text and "clp" in text and "±" in text
    runner.run("texas", "medium", ["mlp", "clp_paper"], 2, tmp_path / "direct", epochs=5, progress=False)
    a = last_results(tmp_path / "cli" / records.RESULTS_FILE)
    b = last_results(tmp_path / "direct" / records.RESULTS_FILE)
    assert sorted(a) == sorted(b) == sorted(("texas", "medium", i, m) for i in (0, 1) for m in ("mlp", "clp_paper"))
    for k in a:
        assert (a[k]["params"], a[k]["val"], a[k]["test"]) == (b[k]["params"], b[k]["val"], b[k]["test"]), k
    header = json.loads((tmp_path / "cli" / records.RESULTS_FILE).read_text().splitlines()[0])
    assert header["argv"][:3] == ["jaxclp", "run", "--dataset"]
    (tmp_path / "cli" / "summary.png").unlink()
    assert cli.main(["summarize", str(tmp_path / "cli")]) == 0  # rewrites the same summary, and the plot
    assert summary.read_text() == text and (tmp_path / "cli" / "summary.png").stat().st_size > 1000


def test_cli_user_errors_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    """A user error is one line ``jaxclp: error: ...`` on stderr and exit status 2 (argparse's
    convention), not a traceback; nothing is written for a refused run."""
    monkeypatch.setenv("JAXCLP_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("JAXCLP_TRACEBACK", raising=False)
    cases = [(["run", "--dataset", "texas", "--methods", "mlp,nope"], "unknown methods ['nope']"),
             (["run", "--dataset", "no-such-graph"], "unknown dataset 'no-such-graph'; valid names: acm"),
             (["run", "--dataset", "texas", "--labels", "y.csv"], "--labels only apply to --graph FILE"),
             (["run", "--graph", str(tmp_path / "missing.npz")], "missing.npz"),
             # the method list is checked before the graph file is read
             (["run", "--graph", str(tmp_path / "missing.npz"), "--methods", "clpp"], "unknown methods ['clpp']")]
    for args, expect in cases:
        out = tmp_path / "o"
        assert cli.main(args + ["--out", str(out), "--no-progress"]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("jaxclp: error: ") and err.count("\n") == 1 and expect in err, (args, err)
        assert "Traceback" not in err and not out.exists(), args


@pytest.mark.parametrize("bad", [["--epochs", "0"], ["--epochs", "-5"], ["--runs", "0"], ["--runs", "x"]])
def test_cli_epochs_and_runs_must_be_positive(tmp_path, capsys, bad):
    """``--epochs 0`` used to record an untrained model with exit 0; ``--runs 0`` reported an internal
    argument name and left an empty folder."""
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--dataset", "texas", "--out", str(out), *bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == f"jaxclp run: error: {bad[0]} must be an integer >= 1; got {bad[1]!r}\n"
    assert not out.exists()


@pytest.mark.parametrize("bad", ["0", "1", "1.5", "-0.2", "x"])
def test_predict_val_fraction_is_checked_when_parsed(tmp_path, capsys, bad):
    """``--val-fraction`` outside (0, 1) is an argparse error (exit 2) before any file is read; it used to print
    'fitting ... 1.5 of them for validation' and fail in the split."""
    with pytest.raises(SystemExit) as e:
        cli.main(["predict", "--graph", str(tmp_path / "missing.csv"), "--labels", str(tmp_path / "y.csv"),
                  "--val-fraction", bad, "--out", str(tmp_path / "p.csv")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == f"jaxclp predict: error: --val-fraction must be a number between 0 and 1 (exclusive, e.g. 0.2); got " \
                  f"{bad!r}\n"
    assert not (tmp_path / "p.csv").exists()


def test_cli_version_datasets_and_help(tmp_path, capsys, monkeypatch):
    import jaxclp

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"jaxclp {jaxclp.__version__}"
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    assert "`jaxclp datasets` lists them" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as e:  # --dataset and --graph are mutually exclusive
        cli.main(["run", "--dataset", "texas", "--graph", "g.npz"])
    assert e.value.code == 2 and "--graph is not allowed with --dataset" in capsys.readouterr().err
    # the registry, with "cached" for a dataset whose files are in the data root
    root = tmp_path / "data"
    spec = jaxclp.datasets.REGISTRY["texas"]
    for fs in spec.files.values():
        (root / fs.path).parent.mkdir(parents=True, exist_ok=True)
        (root / fs.path).write_text("x")
    assert cli.main(["datasets", "--data-root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln.split() for ln in lines if ln.split() and ln.split()[0] in jaxclp.datasets.REGISTRY}
    assert set(rows) == set(jaxclp.datasets.REGISTRY)
    assert rows["texas"][4] == "yes" and rows["cornell"][4] == "no"
    assert rows["texas"][1:3] == ["?", "?"]  # not parsed yet: sizes unknown, not guessed


def test_cli_summarize_missing_or_empty_folder(tmp_path, capsys):
    """``summarize`` on a missing folder raised FileNotFoundError about summary.md; on an empty one it wrote
    an empty table with exit 0."""
    assert cli.main(["summarize", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["summarize", str(tmp_path / "empty")]) == 2
    assert "holds no result records" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "summary.md").exists()


def platonov_npz(path, n=60, k=3, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    feats = (np.eye(k)[y] + 0.5 * rng.standard_normal((n, k))).astype(np.float32)
    edges = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.1])
    masks = np.zeros((3, 2, n), bool)
    for s in range(2):
        perm = rng.permutation(n)
        for part, idx in enumerate(np.array_split(perm, 3)):
            masks[part, s, idx] = True
    np.savez(path, node_features=feats, node_labels=y, edges=edges, train_masks=masks[0], val_masks=masks[1],
             test_masks=masks[2])
    return masks


def test_cli_run_on_a_user_graph_with_its_published_masks(tmp_path, capsys):
    """``jaxclp run --graph FILE --split published`` runs on a graph the registry does not know,
    with the file's own masks; the records are keyed by the file's name."""
    masks = platonov_npz(tmp_path / "mygraph.npz")
    out = tmp_path / "out"
    assert cli.main(["run", "--graph", str(tmp_path / "mygraph.npz"), "--split", "published", "--methods",
                     "mlp,lp", "--runs", "2", "--epochs", "5", "--out", str(out), "--no-progress"]) == 0
    recs = [r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "result"]
    assert sorted((r["dataset"], r["run"], r["method"]) for r in recs) == [
        ("mygraph", i, m) for i in (0, 1) for m in ("lp", "mlp")]
    assert all(r["split"] == "published" and r["seed"] is None for r in recs)
    assert len({r["config_hash"] for r in recs}) == 1 and "arrays_sha256" in recs[0]["config"]["data"]
    assert "mygraph" in (out / "summary.md").read_text()
    assert masks.shape == (3, 2, 60)
    ds = load_file(tmp_path / "mygraph.npz")  # the CLI's first line on stderr describes the graph it read
    assert f"jaxclp: {ds.describe()}\n" in capsys.readouterr().err and ds.describe().startswith("mygraph: 60 nodes")


def test_cli_run_metric_roc_auc(tmp_path, capsys):
    """--metric roc_auc scores a two-class edge list by ROC-AUC (the summary's metric column says so); on three
    classes it is a one-line error, exit 2."""
    rng = np.random.default_rng(1)
    n = 60
    y = rng.integers(0, 2, n)
    (tmp_path / "e.csv").write_text("".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    (tmp_path / "y.csv").write_text("".join(f"{i},{v}\n" for i, v in enumerate(y)))
    out = tmp_path / "out"
    args = ["run", "--graph", str(tmp_path / "e.csv"), "--labels", str(tmp_path / "y.csv"), "--methods", "lp",
            "--runs", "1", "--no-progress"]
    assert cli.main([*args, "--metric", "roc_auc", "--out", str(out)]) == 0
    assert "| e | medium | roc_auc |" in (out / "summary.md").read_text()
    (tmp_path / "y.csv").write_text("".join(f"{i},{i % 3}\n" for i in range(n)))
    capsys.readouterr()
    assert cli.main([*args, "--metric", "roc_auc", "--out", str(tmp_path / "o3")]) == 2
    assert "jaxclp: error: e: metric 'roc_auc' is binary ROC-AUC and needs 2 classes" in capsys.readouterr().err


def test_cli_run_on_an_edge_list_with_unlabelled_nodes(tmp_path):
    """A user's edge list whose labels file marks nodes unlabelled (-1): they stay in the graph, the random
    splits cover the labelled nodes only, and every method is scored on labelled test nodes."""
    rng = np.random.default_rng(0)
    n = 80
    y = rng.integers(0, 3, n)
    e = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < (0.2 if y[i] == y[j] else 0.02)]
    (tmp_path / "e.csv").write_text("".join(f"{a},{b}\n" for a, b in e))
    y_file = np.where(np.arange(n) % 4 == 0, -1, y)
    (tmp_path / "y.csv").write_text("".join(f"{i},{v}\n" for i, v in enumerate(y_file)))
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="20 of 80 node"):
        assert cli.main(["run", "--graph", str(tmp_path / "e.csv"), "--labels", str(tmp_path / "y.csv"),
                         "--methods", "mlp,lp,clp_mlp", "--runs", "2", "--epochs", "5", "--out", str(out),
                         "--no-progress"]) == 0
    recs = [r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "result"]
    assert len(recs) == 6 and all(np.isfinite(r["test"]) for r in recs)
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the run's plot beside summary.md
    with pytest.warns(UserWarning):
        ds = load_file(tmp_path / "e.csv", labels=tmp_path / "y.csv")
    sp = runner.get_splits(ds, "medium", 2, 0)
    assert np.all(sp.train.astype(int) + sp.val + sp.test == (y_file >= 0))  # 60 labelled nodes, 6/6/48
    assert sp.sizes()[0].tolist() == [6, 6, 48]
    lp = {r["run"]: r["test"] for r in recs if r["method"] == "lp"}
    assert all(round(48 * v) == pytest.approx(48 * v, abs=1e-4) for v in lp.values())  # k/48: labelled test nodes


@needs_shared
def test_cli_fills_the_persistent_xla_cache(tmp_path):
    """In fresh processes (the cache is process-global config): run writes compiled executables and lowered
    programs (jaxclp.program_store) to $JAXCLP_XLA_CACHE (conftest turns both off for the in-process tests), and a
    second process that reads them back writes the same records."""
    env = dict(os.environ, JAXCLP_DATA=str(tmp_path / "data"), JAXCLP_DATA_URL=SHARED.as_uri(),
               JAXCLP_XLA_CACHE=str(tmp_path / "xla"), JAXCLP_CACHE=str(tmp_path / "parsed"))
    env.pop("JAXCLP_PROGRAM_STORE", None)
    recs = []
    for out in ("out", "again"):
        # mlp and lp: trained and propagation programs both, without a CLP grid to compile twice
        cmd = [sys.executable, "-m", "jaxclp", *ARGS, "--methods", "mlp,lp", "--runs", "1",
               "--out", str(tmp_path / out)]
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        assert (tmp_path / out / "summary.md").exists()
        recs.append([(r["method"], r["test"], r["val"], r["params"]) for r in records.read_records(
            tmp_path / out / records.RESULTS_FILE) if r["type"] == "result"])
        if out == "out":
            assert len([p for p in (tmp_path / "xla").glob("*") if p.is_file()]) >= 1
            stored = sorted(p.name for p in (tmp_path / "xla" / "programs").iterdir())
            assert len(stored) >= 2
    assert recs[0] == recs[1] and len(recs[0]) == 2
    assert sorted(p.name for p in (tmp_path / "xla" / "programs").iterdir()) == stored  # all read back


def test_cli_distributed_flags_parse_and_are_checked(tmp_path, capsys, monkeypatch):
    """``run --coordinator HOST:PORT --num-processes N --process-id I`` reaches
    ``jax.distributed.initialize`` (before any device is touched); partial or inconsistent flags are a
    one-line user error and nothing is initialized or written."""
    calls = []
    monkeypatch.setattr(cli, "_init_distributed", lambda opts: calls.append(opts))
    monkeypatch.setattr(cli, "run", lambda *args, **kw: calls.append("run") or [])
    monkeypatch.setattr(cli, "write_summary", lambda *args, **kw: "summary.md")
    base = ["run", "--dataset", "texas", "--out", str(tmp_path / "o"), "--no-progress"]
    good = ["--coordinator", "127.0.0.1:1234", "--num-processes", "2", "--process-id", "0"]
    assert cli.main(base + good) == 0
    assert calls == [{"coordinator_address": "127.0.0.1:1234", "num_processes": 2, "process_id": 0}, "run"]
    calls.clear()
    assert cli.main(base) == 0 and calls == ["run"]  # no flags: one process, no initialize
    calls.clear()
    for bad, expect in (([*good[:2]], "--coordinator also need(s) --num-processes, --process-id"),
                        (["--num-processes", "2", "--process-id", "1"], "need(s) --coordinator"),
                        (["--coordinator", "localhost", *good[2:]], "--coordinator must be HOST:PORT"),
                        ([*good[:4], "--process-id", "2"], "--process-id must be in 0..1")):
        assert cli.main(base + bad) == 2, bad
        err = capsys.readouterr().err
        assert err.startswith("jaxclp: error: ") and expect in err, (bad, err)
    assert calls == []
    with pytest.raises(SystemExit) as e:
        cli.main(base + ["--coordinator", "h:1", "--num-processes", "2", "--process-id", "-1"])
    assert e.value.code == 2 and "--process-id must be an integer >= 0; got '-1'" in capsys.readouterr().err


def test_cli_run_on_a_non_zero_process_writes_nothing(tmp_path, capsys, monkeypatch):
    """Only process 0 of a jax.distributed job writes: process 1 runs the same work and leaves no folder,
    no records, no lock and no summary; process 0 writes them."""
    platonov_npz(tmp_path / "g.npz")
    args = ["run", "--graph", str(tmp_path / "g.npz"), "--split", "published", "--methods", "lp", "--runs", "1",
            "--no-progress"]
    monkeypatch.setattr(runner.jax, "process_index", lambda: 1)
    assert cli.main(args + ["--out", str(tmp_path / "p1")]) == 0
    assert not (tmp_path / "p1").exists()
    assert "process 0 writes the records" in capsys.readouterr().err
    monkeypatch.setattr(runner.jax, "process_index", lambda: 0)
    assert cli.main(args + ["--out", str(tmp_path / "p0")]) == 0
    recs = [r for r in records.read_records(tmp_path / "p0" / records.RESULTS_FILE) if r["type"] == "result"]
    assert [(r["run"], r["method"]) for r in recs] == [(0, "lp")] and (tmp_path / "p0" / "summary.md").exists()


def test_cli_run_two_processes(tmp_path):
    """The real thing: two ``jaxclp run`` processes joined by ``--coordinator/--num-processes/--process-id``
    (jax.distributed, gloo CPU collectives) on one --out: both exit 0, the records are written once (by
    process 0) and equal a one-process run's."""
    import socket

    platonov_npz(tmp_path / "g.npz")
    args = ["run", "--graph", str(tmp_path / "g.npz"), "--split", "published", "--methods", "lp", "--runs", "2",
            "--no-progress"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = host_devices_env(2, JAXCLP_XLA_CACHE="off")
    dist = ["--out", str(tmp_path / "two"), "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
    procs = [subprocess.Popen([sys.executable, "-m", "jaxclp", *args, *dist, "--process-id", str(i)], cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
    assert "process 0 writes the records" in outs[1]
    recs = records.read_records(tmp_path / "two" / records.RESULTS_FILE)
    assert [r["type"] for r in recs] == ["header", "result", "result"]
    assert cli.main(args + ["--out", str(tmp_path / "one")]) == 0
    one = {(r["run"], r["method"]): r for r in records.read_records(tmp_path / "one" / records.RESULTS_FILE)
           if r["type"] == "result"}
    for r in recs[1:]:  # the subprocesses run float32, this process float64 (conftest): equal to float32
        want = one[(r["run"], r["method"])]
        assert r["params"] == want["params"]
        assert r["val"] == pytest.approx(want["val"], abs=1e-6) and r["test"] == pytest.approx(want["test"], abs=1e-6)


def test_cli_pass_through_subcommands_take_their_own_options(tmp_path, capsys, monkeypatch):
    """`jaxclp anchors --datasets ...` reaches its own parser (argparse's REMAINDER alone refused a leading option),
    and `jaxclp anchors` runs end to end on a user's file. There is no `jaxclp bench`: the benchmarks are not in
    the installed package (`python -m benchmarks.run` from a clone)."""
    from files import platonov_npz  # noqa: F811  (the anchors tests' file: ring, published masks)

    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--quick"])
    assert e.value.code == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.main(["anchors", "-h"])
    assert e.value.code == 0 and "usage: jaxclp anchors" in capsys.readouterr().out
    monkeypatch.setenv("JAXCLP_XLA_CACHE", "off")
    f = platonov_npz(tmp_path / "g.npz", classes=3)
    out = tmp_path / "anch"
    assert cli.main(["anchors", "--datasets", str(f), "--models", "gat_sep", "--depths", "1", "--splits", "2",
                     "--epochs", "2", "--hidden", "8", "--heads", "2", "--out", str(out)]) == 0
    (r,) = json.loads((out / "results.json").read_text())["runs"]
    assert (r["dataset"], r["model"], r["spec"]["heads"], r["spec"]["sep"], r["splits"]) == ("g", "gat_sep", 2, True, 2)
    assert "| g | gat_sep |" in (out / "anchors.md").read_text()
    assert cli.main(["anchors", "--datasets", str(tmp_path / "missing.npz"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("jaxclp: error:")


def test_cli_prints_user_warnings_as_one_line():
    """Inside the command a library UserWarning prints as ``jaxclp: warning: ...`` (no file:line, no source
    line); other categories keep Python's format; the formatter is restored afterwards."""
    import warnings

    before = warnings.formatwarning
    with cli._user_warnings():
        assert warnings.formatwarning("2 of 9 nodes unlabelled", UserWarning, "x.py", 3) == \
            "jaxclp: warning: 2 of 9 nodes unlabelled\n"
        assert "x.py:3: DeprecationWarning: old" in warnings.formatwarning("old", DeprecationWarning, "x.py", 3)
    assert warnings.formatwarning is before


def test_cli_run_with_custom_label_rates(tmp_path, capsys):
    """``--split 60/20/20`` (percents or fractions): random splits of those rates, records keyed by the canonical
    name "0.6/0.2/0.2"; impossible rates are a one-line argparse error."""
    platonov_npz(tmp_path / "g.npz")
    out = tmp_path / "out"
    assert cli.main(["run", "--graph", str(tmp_path / "g.npz"), "--split", "60/20/20", "--methods", "lp", "--runs",
                     "2", "--out", str(out), "--no-progress"]) == 0
    recs = [r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "result"]
    assert [r["split"] for r in recs] == ["0.6/0.2/0.2"] * 2
    assert all(round(12 * r["test"]) == pytest.approx(12 * r["test"], abs=1e-4) for r in recs)  # 12 test nodes
    capsys.readouterr()
    for bad in ("60/30/20", "0.7/0.4", "huge"):
        with pytest.raises(SystemExit) as e:
            cli.main(["run", "--graph", str(tmp_path / "g.npz"), "--split", bad, "--out", str(out)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("jaxclp run: error: --split ") and err.count("\n") == 1


# ------------------------------------------------------------------------------- what a newcomer meets
def _edge_list(tmp_path, labels, p_in=0.3, p_out=0.02, seed=0):
    """An edge list over nodes 0..n-1 (homophilous edges) and its labels file; returns the two paths."""
    rng = np.random.default_rng(seed)
    y = np.asarray(labels)
    n = y.size
    e = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < (p_in if y[i] == y[j] else p_out)]
    (tmp_path / "e.csv").write_text("".join(f"{a},{b}\n" for a, b in e))
    (tmp_path / "y.csv").write_text("".join(f"{i},{v}\n" for i, v in enumerate(y)))
    return tmp_path / "e.csv", tmp_path / "y.csv"


def test_cli_help_shows_every_default_and_describes_methods_and_targets(capsys):
    """Every option of every subcommand has help text, with its default shown; run and predict list each method
    with a line, reproduce each target."""
    from jaxclp.experiments import reproduce
    from jaxclp.experiments.methods import METHODS

    parser = cli._parser()
    subs = next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction)).choices
    no_default = {"help", "dataset", "graph", "labels", "target", "dir", "version"}  # required or conditional
    for name in ("run", "predict", "reproduce", "summarize", "datasets"):
        fmt = subs[name]._get_formatter()
        for action in subs[name]._actions:
            assert action.help, (name, action.dest)  # no option without a word on what it does
            if action.dest not in no_default and not action.required:  # the default, as a value or in words
                assert "default" in fmt._get_help_string(action), (name, action.dest)
    assert set(cli.METHOD_HELP) == set(METHODS) and all(cli.METHOD_HELP.values())
    assert all(reproduce.target_help(t) for t in reproduce.TARGETS)
    for cmd in ("run", "predict", "reproduce"):
        with pytest.raises(SystemExit):
            cli.main([cmd, "--help"])
        out = capsys.readouterr().out
        flat = " ".join(out.split())
        if cmd == "reproduce":
            assert "(default: results)" in flat and "(default: 10)" in flat  # --out, --runs
            for t in reproduce.TARGETS:
                assert re.search(rf"^  {t}\s+\S", out, re.M), t
            continue
        for m in METHODS:
            assert re.search(rf"^  {m}\s+{re.escape(cli.METHOD_HELP[m][:20])}", out, re.M), (cmd, m)
        assert "(default: None)" not in flat and "(default: False)" not in flat  # said in words instead
        assert "(default: 60)" in flat
        assert "(default: clp's own list: mlp, link, linkx" in flat
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    assert "Run methods on random (or published) splits of one graph" in flat  # the description
    assert "(default: results/runs)" in flat and "(default: medium)" in flat and "(default: 500)" in flat


def test_cli_refuses_silent_inputs_with_one_line(tmp_path, capsys):
    """Each input that ran silently or ended in a traceback is one line naming the file or option and the way out,
    exit 2, nothing written."""
    e, y = _edge_list(tmp_path, [0, 1] * 10)
    (tmp_path / "empty.csv").write_text("src,dst\n")
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "labels_dir").mkdir()
    (tmp_path / "labels_dir" / "y.csv").write_text(y.read_text())
    (tmp_path / "ghost.csv").write_text("0,1\n1,25\n")
    out = str(tmp_path / "o")
    run = ["run", "--labels", str(y), "--methods", "lp", "--runs", "1", "--no-progress"]
    cases = [
        ([*run, "--graph", str(tmp_path / "empty.csv"), "--out", out], "empty.csv: no edges", "one edge per line"),
        ([*run, "--graph", str(e), "--out", str(tmp_path / "a_file")], "--out", "is not a folder"),
        ([*run, "--graph", str(e), "--out", str(tmp_path / "a_file" / "sub")], "a_file is a file", "name a new"),
        (["reproduce", "table2", "--out", str(tmp_path / "a_file")], "--out", "is not a folder"),
        (["predict", "--graph", str(e), "--labels", str(y), "--out", str(tmp_path)], "is a folder",
         "predictions.csv"),
        (["run", "--graph", str(e), "--labels", str(tmp_path / "labels_dir"), "--out", out],
         "--labels " + str(tmp_path / "labels_dir") + " is a folder, not a file", "(it holds y.csv)"),
        ([*run, "--graph", str(tmp_path / "ghost.csv"), "--out", out], "1 node id(s) out of range [0, 20)",
         "an unlabelled one with an empty label (a line '25,')"),
        ([*run, "--graph", str(e), "--priors", "mlp,gnn", "--out", out], "unknown base predictor(s) ['gnn']",
         "choose from gat, gat_tuned, gcn"),
    ]  # a bad --time-limit is refused when parsed: test_every_bad_value_is_one_line_naming_option_value_and_...
    for args, what, way_out in cases:
        assert cli.main(args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("jaxclp: error: ") and err.count("\n") == 1, (args, err)
        assert what in err and way_out in err, (args, err)
        assert not Path(out).exists(), args
    assert (tmp_path / "a_file").read_text() == "x"


def test_cli_two_class_graph_metric_and_note(tmp_path, capsys):
    """Every two-class user graph is scored by ROC-AUC unless --metric says otherwise (one rule, whatever the class
    balance: 40 % positives as 20 % or 50 %), with a one-line note naming the rarer class's share and the way to
    accuracy; the ranking's chance line is 50. Every printed line names the metric used."""
    e, y = _edge_list(tmp_path, [1 if i % 5 in (0, 1) else 0 for i in range(60)], p_in=0.1)  # 24 of 60: 40 %
    args = ["run", "--graph", str(e), "--labels", str(y), "--methods", "lp", "--runs", "2", "--split", "dense",
            "--no-progress"]
    assert cli.main([*args, "--out", str(tmp_path / "a")]) == 0
    io = capsys.readouterr()
    assert ("jaxclp: note: e has two classes (40% of its labelled nodes are 1): scoring ROC-AUC, as for every "
            "two-class graph (--metric accuracy to change it)") in io.err
    describe = next(ln for ln in io.err.splitlines() if ln.startswith("jaxclp: e: "))
    assert describe.endswith("metric roc_auc")  # the graph's line names the metric used
    assert "test ROC-AUC" in io.out and "  chance (a constant score): 50.0" in io.out.splitlines()
    assert {r["metric"] for r in records.read_records(tmp_path / "a" / records.RESULTS_FILE)
            if r["type"] == "result"} == {"roc_auc"}
    assert cli.main([*args, "--metric", "accuracy", "--out", str(tmp_path / "b")]) == 0
    io = capsys.readouterr()
    assert "note:" not in io.err and io.err.rstrip().endswith("metric accuracy") and "test accuracy" in io.out
    assert "  chance (always the majority class): " in io.out
    _edge_list(tmp_path, [i % 2 for i in range(60)], p_in=0.1)
    assert cli.main([*args, "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert "two classes (50% of its labelled nodes are 0): scoring ROC-AUC" in err and "metric roc_auc" in err


def test_cli_ranking_shows_chance_and_marks_methods_not_above_it(tmp_path):
    """The ranking's chance line is the mean over the runs of the header's majority-class shares; a method whose
    mean is within its std of it is marked '≤ chance' and counted in one line; the best line says how far above
    chance it is; records without the header field say chance is unknown in one line."""
    out = tmp_path / "r"
    out.mkdir()
    recs = [{"type": "header", "dataset": "g", "split": "medium", "chance": [0.64, 0.66]}]
    for m, tests in (("clp", [0.68, 0.69]), ("lp", [0.64, 0.68]), ("mlp", [0.60, 0.62])):
        recs += [{"type": "result", "dataset": "g", "split": "medium", "run": i, "method": m, "metric": "accuracy",
                  "val": 0.5, "test": t, "params": {}, "seconds": 0.1} for i, t in enumerate(tests)]
    (out / records.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in recs))
    lines = cli.ranking_text(out, "g", "medium", ["clp", "lp", "mlp"]).splitlines()
    assert lines[0].endswith("% test accuracy over 2 runs (mean ± std), +3.5 over chance")
    assert [ln.split()[1] for ln in lines[2:5]] == ["clp", "lp", "mlp"]
    assert not lines[2].endswith("≤ chance") and lines[3].endswith("≤ chance") and lines[4].endswith("≤ chance")
    assert lines[5] == "  chance (always the majority class): 65.0"
    assert lines[6] == ("≤ chance: 2 of 3 methods (lp, mlp) are not above chance by more than their std over the "
                        "runs")
    (out / records.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in recs[1:]))
    text = cli.ranking_text(out, "g", "medium", ["clp", "lp", "mlp"])
    assert "≤ chance" not in text and text.splitlines()[5].startswith("chance: unknown for these records")


def test_cli_run_prints_the_ranking_in_words(tmp_path, capsys):
    """``run`` ends with the best method and each method's mean ± std over the runs (the records' own numbers,
    best first), the metric named; then the summary's paths."""
    e, y = _edge_list(tmp_path, [i % 3 for i in range(45)], p_in=0.25, p_out=0.05)
    out = tmp_path / "out"
    assert cli.main(["run", "--graph", str(e), "--labels", str(y), "--methods", "lp,clp_star", "--runs", "3",
                     "--epochs", "3", "--out", str(out), "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    recs = [r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "result"]
    score = {m: 100 * np.array([r["test"] for r in recs if r["method"] == m]) for m in ("lp", "clp_star")}
    best, second = sorted(score, key=lambda m: -score[m].mean())
    assert lines[0].startswith(f"best on e (medium split): {best}, {score[best].mean():.1f} ± "
                               f"{score[best].std(ddof=1):.1f} % test accuracy over 3 runs (mean ± std)")
    assert lines[1] == "ranking (test accuracy in %, mean ± std over the runs):"
    assert lines[2].split() == ["1.", best, f"{score[best].mean():.1f}", "±", f"{score[best].std(ddof=1):.1f}",
                                "(test", "accuracy", "%,", "3", "runs)"]  # each line names the metric
    assert lines[3].split()[:3] == ["2.", second, f"{score[second].mean():.1f}"]
    assert lines[-2:] == [str(out / "summary.md"), str(out / "summary.png")]
    assert "Paper:" not in (out / "summary.md").read_text()  # a user's graph: no paper legend


def test_cli_labels_csv_with_named_columns(tmp_path, capsys):
    """A labels CSV with more columns (MUSAE's id,days,mature,views,partner,new_id) is read through its header
    with --id-column/--label-column; without them the error points at the header line and names both options."""
    rng = np.random.default_rng(3)
    n = 30
    mature = rng.random(n) < 0.5
    ids = rng.permutation(1000)[:n]  # the `id` column: not the ids the edges use
    rows = "".join(f"{ids[i]},{100 + i},{mature[i]},{7 * i},False,{i}\n" for i in range(n))
    (tmp_path / "target.csv").write_text("id,days,mature,views,partner,new_id\n" + rows)
    e, _ = _edge_list(tmp_path, mature.astype(int))
    args = ["run", "--graph", str(e), "--labels", str(tmp_path / "target.csv"), "--methods", "lp", "--runs", "1",
            "--no-progress"]
    assert cli.main([*args, "--out", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert "target.csv: line 1 (the header 'id,days,mature,views,partner,new_id'): 6 columns" in err
    assert "--id-column" in err and "--label-column" in err and err.count("\n") == 1
    assert cli.main([*args, "--id-column", "new_id", "--label-column", "mature", "--out", str(tmp_path / "o2")]) == 0
    err = capsys.readouterr().err
    assert f"labelled nodes per class: False={int((~mature).sum())}, True={int(mature.sum())}" in err
    assert cli.main([*args, "--id-column", "new_id", "--label-column", "Mature ", "--out", str(tmp_path / "o3")]) == 0
    assert (records.read_records(tmp_path / "o3" / records.RESULTS_FILE)[-1]["test"]
            == records.read_records(tmp_path / "o2" / records.RESULTS_FILE)[-1]["test"])  # case and spaces forgiven
    capsys.readouterr()
    assert cli.main([*args, "--id-column", "new_id", "--label-column", "maturity", "--out", str(tmp_path / "o4")]) == 2
    err = capsys.readouterr().err
    assert "no column named 'maturity' for --label-column" in err and "columns are id, days, mature" in err


@needs_shared
def test_cli_musae_target_csv_header_error(tmp_path, capsys):
    """The published MUSAE file, as the issue met it: the error names line 1 (the header), not the last line."""
    d = SHARED / "twitch" / "ENGB"
    assert cli.main(["run", "--graph", str(d / "musae_ENGB_edges.csv"), "--labels", str(d / "musae_ENGB_target.csv"),
                     "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "musae_ENGB_target.csv: line 1 (the header 'id,days,mature,views,partner,new_id')" in err
    assert "line 7127" not in err


def test_run_says_what_it_reuses_and_plumbs_priors_and_time_limit(tmp_path, capsys, monkeypatch):
    """A resumed run names the records it reuses and the number it computes. ``priors``/``time_limit`` reach each
    split's Context, enter the configuration only when given (a default run keeps its hash), and a method's
    ``skipped`` predictors go into the record and the ranking's words."""
    from jaxclp.experiments import candidates, methods

    e, y = _edge_list(tmp_path, [i % 2 for i in range(60)], p_in=0.1)
    ds = load_file(e, labels=y)
    seen = []
    lp = methods.METHODS["lp"]

    def fake(ctx):
        seen.append((ctx.base_priors, ctx.time_limit))
        cands = candidates.Candidates(lp(ctx))
        if ctx.time_limit is not None:
            cands.skipped = ["gcn_tuned", "sage_tuned"]
        return cands

    monkeypatch.setitem(methods.METHODS, "lp", fake)
    out = tmp_path / "out"
    runner.run(ds, "medium", ["lp"], 2, out, progress=False)
    assert "reusing" not in capsys.readouterr().err
    runner.run(ds, "medium", ["lp"], 3, out, progress=False)
    assert f"e/medium: reusing 2 records in {out / records.RESULTS_FILE}, computing 1" in capsys.readouterr().err
    recs = [r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "result"]
    assert seen == [(None, None)] * 3 and all("skipped" not in r for r in recs)
    assert "priors" not in recs[0]["config"] and "time_limit" not in recs[0]["config"]
    old = {k: v for k, v in recs[0]["config"].items()}  # the configuration as written before the options existed
    assert identity.config_hash(old) == recs[0]["config_hash"]
    limited = tmp_path / "limited"
    runner.run(ds, "medium", ["lp"], 2, limited, progress=False, priors="mlp,link", time_limit=30)
    assert seen[3:] == [(("mlp", "link"), 30.0)] * 2
    recs = [r for r in records.read_records(limited / records.RESULTS_FILE) if r["type"] == "result"]
    assert recs[0]["config"]["priors"] == ["mlp", "link"] and recs[0]["config"]["time_limit"] == 30.0
    assert recs[0]["config_hash"] != identity.config_hash(old)
    assert [r["skipped"] for r in recs] == [["gcn_tuned", "sage_tuned"]] * 2
    text = cli.ranking_text(limited, "e", "medium", ["lp"])
    assert ("lp left out gcn_tuned (2 of 2 splits), sage_tuned (2 of 2 splits) for the time limit of 30 s per "
            "split") in text


def test_reproduce_targets_name_their_job_and_summary(tmp_path, monkeypatch):
    """A table target runs its (dataset, split) units as one job (the bar says "dataset 2/3 ...") and tells the
    interrupt handler which folder and summary title are its own."""
    from jaxclp.experiments import reproduce

    calls = []

    def fake_run(name, split, methods, runs, d, **kw):
        tracker = progress._JOB.get()
        tracker.begin(name, split, runs * len(methods))
        calls.append((name, split, tracker.index, tracker.total, progress.active_output()))
        return []

    monkeypatch.setattr(reproduce, "run", fake_run)
    monkeypatch.setattr(reproduce, "write_summary", lambda d, **kw: d / "summary.md")
    reproduce.table4(tmp_path, runs=2, datasets=("texas", "cornell"))
    title = "Heterophily datasets, sparse (5/5/90) and dense (48/32/20) splits"
    assert [c[:4] for c in calls] == [("texas", "sparse", 1, 4), ("cornell", "sparse", 2, 4),
                                      ("texas", "dense", 3, 4), ("cornell", "dense", 4, 4)]
    assert calls[0][4] == (tmp_path / "table4", {"title": title, "methods": reproduce.TABLE_METHODS})
    assert progress.active_output()[0] != tmp_path / "table4"  # restored after the target


def test_cli_comma_lists_forgive_spaces_and_unused_cost_options_warn(tmp_path, capsys, monkeypatch):
    """``--methods "mlp, lp"`` (as typed) reaches run as ["mlp", "lp"]; --priors/--time-limit without clp among the
    methods say in one line that they change nothing; with clp they reach run as a tuple and a float."""
    calls = []
    monkeypatch.setattr(cli, "run", lambda *args, **kw: calls.append((args[2], kw["priors"], kw["time_limit"])))
    monkeypatch.setattr(cli, "write_summary", lambda *args, **kw: "summary.md")
    monkeypatch.setattr(cli, "plot_summary", lambda *args, **kw: None)
    base = ["run", "--dataset", "texas", "--out", str(tmp_path / "o"), "--no-progress"]
    assert cli.main([*base, "--methods", "mlp, lp,", "--time-limit", "5"]) == 0
    assert calls[-1] == (["mlp", "lp"], None, 5.0)
    assert "jaxclp: warning: --time-limit only changes clp's choice of base predictor; mlp, lp ignore it" in \
        capsys.readouterr().err
    assert cli.main([*base, "--methods", "clp", "--priors", " link,mlp ", "--time-limit", "60"]) == 0
    assert calls[-1] == (["clp"], ("link", "mlp"), 60.0)
    assert "warning" not in capsys.readouterr().err
    # the default limit (not typed) reaches clp only and warns of nothing: other methods' records keep theirs
    assert cli.main([*base, "--methods", "mlp,lp"]) == 0 and calls[-1] == (["mlp", "lp"], None, None)
    assert cli.main([*base, "--methods", "lp,clp"]) == 0 and calls[-1] == (["lp", "clp"], None, cli.RUN_TIME_LIMIT)
    assert cli.main([*base, "--methods", "clp", "--time-limit", "none"]) == 0 and calls[-1][2] is None
    assert "warning" not in capsys.readouterr().err


def test_predict_has_a_default_time_budget_and_none_lifts_it():
    from jaxclp.experiments import cli

    p = cli._parser()
    base = ["predict", "--graph", "e.csv", "--labels", "l.csv", "--out", "p.csv"]
    assert p.parse_args(base).time_limit == cli.PREDICT_TIME_LIMIT == 60.0
    assert p.parse_args([*base, "--time-limit", "none"]).time_limit is None
    assert p.parse_args([*base, "--time-limit", "12.5"]).time_limit == 12.5
    assert p.parse_args(["run", "--graph", "e.csv", "--labels", "l.csv"]).time_limit == cli.RUN_TIME_LIMIT == 60.0


def test_run_and_predict_pad_to_shape_buckets_unless_exact_shapes(tmp_path, monkeypatch):
    """``jaxclp run``, ``predict`` and ``explain`` fit on shape buckets by default; ``--exact-shapes`` turns them
    off."""
    calls = []
    monkeypatch.setattr(cli, "run", lambda *args, **kw: calls.append(kw["shape_buckets"]))
    monkeypatch.setattr(cli, "write_summary", lambda *args, **kw: "summary.md")
    monkeypatch.setattr(cli, "plot_summary", lambda *args, **kw: None)
    monkeypatch.setattr(cli, "ranking_text", lambda *args, **kw: "")
    base = ["run", "--dataset", "texas", "--out", str(tmp_path / "o"), "--no-progress", "--methods", "lp"]
    assert cli.main(base) == 0 and cli.main([*base, "--exact-shapes"]) == 0
    assert calls == [True, False]
    p = cli._parser()
    pred = ["predict", "--graph", "e.csv", "--labels", "l.csv", "--out", "p.csv"]
    assert not p.parse_args(pred).exact_shapes and p.parse_args([*pred, "--exact-shapes"]).exact_shapes
    ex = ["explain", "--graph", "e.csv", "--labels", "l.csv", "--node", "a"]
    assert not p.parse_args(ex).exact_shapes and p.parse_args([*ex, "--exact-shapes"]).exact_shapes


def test_run_and_predict_plan_print_the_search_and_fit_nothing(tmp_path, capsys, monkeypatch):
    """--plan prints clp's search plan for the graph (the steps in order, expected seconds, what the limit would
    leave out) and exits 0 without fitting or writing anything."""
    from jaxclp.experiments import methods

    rng = np.random.default_rng(0)
    edges = tmp_path / "edges.csv"
    edges.write_text("".join(f"{u},{v}\n" for u, v in rng.integers(0, 40, size=(120, 2)) if u != v))
    labels = tmp_path / "labels.csv"
    labels.write_text("".join(f"{i},{i % 2}\n" for i in range(40)))
    monkeypatch.setattr(methods, "fit_prior", lambda *a, **k: pytest.fail("--plan fitted a predictor"))
    out = tmp_path / "out"
    assert cli.main(["run", "--graph", str(edges), "--labels", str(labels), "--plan", "--time-limit", "4",
                     "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "clp search plan (time limit 4 s per split)" in text and "base predictor  gcn_tuned" in text
    assert "the limit would leave out:" in text and not out.exists()
    assert cli.main(["predict", "--graph", str(edges), "--labels", str(labels), "--plan", "--priors", "link,gcn",
                     "--out", str(tmp_path / "p.csv")]) == 0
    text = capsys.readouterr().out
    assert "base predictor  link" in text and "gcn_tuned" not in text and not (tmp_path / "p.csv").exists()


# ------------------------------------------------------------------ issue 70: bad values, names, help defaults
@pytest.mark.parametrize("args, line", [
    (["--runs", "0"], "jaxclp run: error: --runs must be an integer >= 1; got '0'"),
    (["--runs", "x"], "jaxclp run: error: --runs must be an integer >= 1; got 'x'"),
    (["--time-limit", "abc"], "jaxclp run: error: --time-limit must be seconds (a number >= 0) or 'none' for no "
                              "limit; got 'abc'"),
    (["--time-limit", "-3"], "jaxclp run: error: --time-limit must be seconds (a number >= 0) or 'none' for no "
                             "limit; got '-3'"),
    (["--time-limit", "nan"], "jaxclp run: error: --time-limit must be seconds (a number >= 0) or 'none' for no "
                              "limit; got 'nan'"),
    (["--seed", "1.5"], "jaxclp run: error: --seed must be an integer; got '1.5'"),
    (["--metric", "f1"], "jaxclp run: error: --metric must be one of accuracy, roc_auc; got 'f1'"),
    (["--split", "huge"], "jaxclp run: error: --split must be one of sparse, medium, dense, published or "
                          "TRAIN/VAL[/TEST] label rates (e.g. 0.6/0.2/0.2 or 60/20/20); got 'huge'"),
    (["--epochs"], "jaxclp run: error: --epochs needs a value (expected one argument)"),
])
def test_every_bad_value_is_one_line_naming_option_value_and_what_is_accepted(tmp_path, capsys, args, line):
    """``--time-limit abc`` and ``--runs 0`` printed argparse's 12-line usage block first; now every bad value is
    one line ``jaxclp run: error: OPTION must be ...; got 'VALUE'`` and exit 2, nothing written."""
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--dataset", "texas", "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == line + "\n" and "usage:" not in err
    assert not (tmp_path / "o").exists()


def test_bad_values_of_other_subcommands_are_one_line_too(tmp_path, capsys):
    for argv, line in ((["reproduce", "table9"], "jaxclp reproduce: error: TARGET must be one of "),
                       (["reproduce", "table2", "--runs", "-1"],
                        "jaxclp reproduce: error: --runs must be an integer >= 1; got '-1'"),
                       (["predict", "--dataset", "texas", "--out", "p.csv", "--method", "nomethod"],
                        "jaxclp predict: error: --method must be one of "),
                       (["nope"], "jaxclp: error: the command must be one of run, predict, explain, reproduce")):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith(line) and err.count("\n") == 1, (argv, err)
    # a missing option is no bad value: argparse's usage line stays, it names what the command needs
    with pytest.raises(SystemExit) as e:
        cli.main(["run"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: jaxclp run" in err and "one of the arguments --dataset --graph" in err


def test_help_prints_the_time_limit_default_once(capsys):
    for sub, value in (("run", "60"), ("predict", "60")):
        with pytest.raises(SystemExit):
            cli.main([sub, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        start = text.index("--time-limit SECONDS seconds")
        part = text[start:text.index("--plan", start)]
        assert part.count("(default:") == 1 and part.endswith(f"(default: {value}) "), part


def test_features_with_the_wrong_number_of_rows_name_the_way_out(tmp_path, capsys):
    e, y = _edge_list(tmp_path, [i % 2 for i in range(12)])
    np.save(tmp_path / "x.npy", np.ones((10, 2), np.float32))
    assert cli.main(["run", "--graph", str(e), "--labels", str(y), "--features", str(tmp_path / "x.npy"),
                     "--out", str(tmp_path / "o"), "--plan"]) == 2
    err = capsys.readouterr().err
    assert "x.npy: 10 feature rows but the labels file defines 12 nodes; give one row per node of the graph (12 " \
           "rows, row i for node id i, 0..11;" in err and err.count("\n") == 1


@pytest.mark.parametrize("rel, name", [("PTBR/musae_PTBR_edges.csv", "musae_PTBR"), ("PTBR/edges.csv", "PTBR"),
                                       ("git/data/edges.csv.gz", "git"), ("cora/cora.edges", "cora"),
                                       ("x/my-graph-edges.txt", "my-graph"), ("x/mine.npz", "mine"),
                                       ("books/graph.csv", "books"), ("y/roads.tsv.xz", "roads")])
def test_a_graph_file_is_named_after_its_folder_or_stem(tmp_path, rel, name):
    from jaxclp.datasets.files import graph_name

    assert graph_name(tmp_path / rel) == name


def test_run_and_predict_name_the_graph_after_the_folder_or_name(tmp_path, capsys):
    """``run --graph PTBR/edges.csv`` records the dataset ``PTBR`` (it was ``edges``); ``--name`` sets it for run and
    predict (records, ranking title, predictions' JSON); ``--name`` with ``--dataset`` is refused."""
    d = tmp_path / "PTBR"
    d.mkdir()
    e, y = _edge_list(d, [i % 2 for i in range(40)])
    e = e.rename(d / "edges.csv")
    base = ["run", "--graph", str(e), "--labels", str(y), "--methods", "lp", "--runs", "1", "--no-progress"]
    assert cli.main([*base, "--out", str(tmp_path / "a")]) == 0
    recs = [r for r in records.read_records(tmp_path / "a" / records.RESULTS_FILE) if r["type"] == "result"]
    assert {r["dataset"] for r in recs} == {"PTBR"}
    assert cli.main([*base, "--out", str(tmp_path / "b"), "--name", "twitch-ptbr"]) == 0
    recs = [r for r in records.read_records(tmp_path / "b" / records.RESULTS_FILE) if r["type"] == "result"]
    assert {r["dataset"] for r in recs} == {"twitch-ptbr"}
    assert "twitch-ptbr" in (tmp_path / "b" / "summary.md").read_text()
    capsys.readouterr()
    assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--name", "ptbr2",
                     "--out", str(tmp_path / "p.csv"), "--no-progress"]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["dataset"] == "ptbr2"
    capsys.readouterr()
    assert cli.main(["run", "--dataset", "texas", "--name", "t", "--out", str(tmp_path / "c")]) == 2
    assert "--name only apply to --graph FILE" in capsys.readouterr().err
