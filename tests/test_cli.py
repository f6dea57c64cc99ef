"""The ``jaxclp`` command: it only parses the config and calls the orchestrator (same records as
``runner.run``), writes the summary, and turns on JAX's persistent compilation cache for run/reproduce."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxclp.experiments import cli, runner
from jaxclp.experiments.analyses.common import last_results
from jaxclp.datasets.fetch import user_cache_dir

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")
ARGS = ["run", "--dataset", "texas", "--methods", "mlp,clp", "--runs", "2", "--epochs", "5", "--no-progress"]


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
    assert capsys.readouterr().out.strip().endswith(str(summary))
    text = summary.read_text()
    assert "texas" in text and "clp" in text and "±" in text
    runner.run("texas", "medium", ["mlp", "clp"], 2, tmp_path / "direct", epochs=5, progress=False)
    a = last_results(tmp_path / "cli" / runner.RESULTS_FILE)
    b = last_results(tmp_path / "direct" / runner.RESULTS_FILE)
    assert sorted(a) == sorted(b) == sorted(("texas", "medium", i, m) for i in (0, 1) for m in ("mlp", "clp"))
    for k in a:
        assert (a[k]["params"], a[k]["val"], a[k]["test"]) == (b[k]["params"], b[k]["val"], b[k]["test"]), k
    header = json.loads((tmp_path / "cli" / runner.RESULTS_FILE).read_text().splitlines()[0])
    assert header["argv"][:3] == ["jaxclp", "run", "--dataset"]
    assert cli.main(["summarize", str(tmp_path / "cli")]) == 0  # rewrites the same summary
    assert summary.read_text() == text


def test_cli_rejects_unknown_method_and_dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCLP_DATA", str(tmp_path / "data"))
    with pytest.raises(ValueError, match="nope"):
        cli.main(["run", "--dataset", "texas", "--methods", "mlp,nope", "--out", str(tmp_path), "--no-progress"])
    with pytest.raises(ValueError, match="valid"):
        cli.main(["run", "--dataset", "no-such-graph", "--out", str(tmp_path), "--no-progress"])


@needs_shared
def test_cli_fills_the_persistent_xla_cache(tmp_path):
    """In a fresh process (the cache is process-global config): run writes compiled executables to
    $JAXCLP_XLA_CACHE (conftest turns the cache off for the in-process tests)."""
    env = dict(os.environ, JAXCLP_DATA=str(tmp_path / "data"), JAXCLP_DATA_URL=SHARED.as_uri(),
               JAXCLP_XLA_CACHE=str(tmp_path / "xla"), JAXCLP_CACHE=str(tmp_path / "parsed"))
    cmd = [sys.executable, "-m", "jaxclp"] + ARGS + ["--runs", "1", "--out", str(tmp_path / "out")]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len([p for p in (tmp_path / "xla").rglob("*") if p.is_file()]) >= 1
    assert (tmp_path / "out" / "summary.md").exists()
