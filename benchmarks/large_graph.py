"""`jaxclp predict --method clp` on an ogbn-arxiv-shaped graph, with PyG's MLP + CorrectAndSmooth on the same split.

``python -m benchmarks.large_graph [--time-limit 60] [--torch-python PATH]`` builds a graph of ogbn-arxiv's
shape (169,343 nodes, ~1.17M undirected edges, 128 dense features, 40 classes; :func:`jaxclp.datasets.synthetic`
with planted classes at edge homophily 0.3 (arxiv has 0.65, but planted at 0.65 with 14 neighbours a node is
nearly always right: C&S scored 0.99 on a 3.4k-node version) and Gaussian class-mean features of modest
separation),
hides the labels of a random 28 % of the nodes (arxiv's test share), writes ``edges.npy``, ``labels.npy`` and
``features.npy``, and times, each as a whole process under ``/usr/bin/time -v`` (wall seconds, peak RSS):

* ``jaxclp predict --graph edges.npy --labels labels.npy --features features.npy --method clp --time-limit T``
  (its own 20 % validation hold-out of the labelled nodes; persistent XLA cache off, so compilation is paid);
* PyG 2.8's ``MLP`` (2 layers, hidden 64, dropout 0.5, Adam lr 0.01, <= 500 epochs, early stopping on validation
  accuracy with patience 50, as jaxclp's MLP) + ``CorrectAndSmooth`` (PyG's ogbn-products example settings:
  50 correction layers at alpha 1.0, 50 smoothing layers at alpha 0.8, autoscale off, scale 20), trained on the
  same labelled nodes with a 20 % validation hold-out (``benchmarks/pyg_cs.py``, run with ``--torch-python``, an
  interpreter that has torch 2.13 and torch_geometric 2.8: the ``bench`` extra).

Both are scored on the hidden nodes (accuracy). Results: ``benchmarks/results/large_graph.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

ARXIV = {"nodes": 169_343, "undirected_edges": 1_166_243, "features": 128, "classes": 40, "h": 0.3,
         "test_share": 0.28}


def build(folder: Path, seed: int = 0, scale: float = 1.0) -> dict:
    """Writes the arxiv-shaped graph's files into ``folder``; returns its facts."""
    import jaxclp

    k = ARXIV["classes"]
    n_per = int(round(ARXIV["nodes"] * scale / k))
    avg_degree = 2 * ARXIV["undirected_edges"] / ARXIV["nodes"]
    ds = jaxclp.datasets.synthetic(ARXIV["h"], avg_degree, num_classes=k, nodes_per_class=n_per, features=None,
                                   seed=seed, name="arxiv-shaped")
    rng = np.random.default_rng(seed + 1)
    y = np.asarray(ds.labels)
    means = rng.normal(size=(k, ARXIV["features"])).astype(np.float32) * 0.25
    x = (means[y] + rng.normal(size=(y.size, ARXIV["features"])).astype(np.float32)).astype(np.float32)
    s, r = np.asarray(ds.graph.senders), np.asarray(ds.graph.receivers)
    und = np.stack([s[s < r], r[s < r]], axis=1).astype(np.int64)
    hidden = rng.random(y.size) < ARXIV["test_share"]
    visible = np.where(hidden, -1, y).astype(np.int64)
    np.save(folder / "edges.npy", und)
    np.save(folder / "labels.npy", visible)
    np.save(folder / "features.npy", x)
    np.save(folder / "truth.npy", y.astype(np.int64))
    return {"nodes": int(y.size), "undirected_edges": int(und.shape[0]), "features": int(x.shape[1]),
            "classes": k, "hidden": int(hidden.sum())}


def timed(cmd: list[str], env: dict | None = None) -> dict:
    """Runs ``cmd`` under ``/usr/bin/time -v``: wall seconds, peak RSS (GiB), exit code, the output's tail."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    cpu = sum(float(v) for v in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", p.stderr))
    return {"wall": wall, "cpu": cpu, "peak_gib": int(rss.group(1)) / 2**20 if rss else None, "returncode": p.returncode,
            "stdout_tail": p.stdout[-3000:], "stderr_tail": p.stderr[-3000:]}


def accuracy_of_predictions(pred_csv: Path, folder: Path) -> float:
    """Accuracy on the hidden nodes of ``jaxclp predict``'s CSV (header ``node,label,role,predicted,...``)."""
    truth = np.load(folder / "truth.npy")
    visible = np.load(folder / "labels.npy")
    lines = pred_csv.read_text().splitlines()
    header = lines[0].split(",")
    i_node, i_pred = header.index("node"), header.index("predicted")
    pred = np.full(truth.size, -1)
    for line in lines[1:]:
        if line.strip():
            f = line.split(",")
            pred[int(f[i_node])] = int(float(f[i_pred]))
    hidden = visible < 0
    return float((pred[hidden] == truth[hidden]).mean())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from jaxclp.experiments.cli import _time_limit_arg

    p.add_argument("--time-limit", type=_time_limit_arg, default=60.0, help="predict's --time-limit (seconds or none)")
    p.add_argument("--priors", default=None, help="predict's --priors (default: its own list)")
    p.add_argument("--name", default="large_graph",
                   help="results file stem under benchmarks/results (default large_graph)")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of arxiv's node count (1: its size)")
    p.add_argument("--torch-python", default=None, help="an interpreter with torch + torch_geometric (bench extra)")
    p.add_argument("--skip-jaxclp", action="store_true")
    p.add_argument("--markdown-only", action="store_true", help="rewrite the .md from the committed .json")
    a = p.parse_args(argv)
    if a.markdown_only:
        out = C.RESULTS_DIR / f"{a.name}.json"
        out.with_suffix(".md").write_text(markdown(C.load_json(out)))
        return 0
    out = C.RESULTS_DIR / f"{a.name}.json"
    payload = C.load_json(out) or {}
    payload.update({"command": "python -m benchmarks.large_graph " + " ".join(argv or sys.argv[1:]),
                    "machine": C.machine_info(), "load_average_start": os.getloadavg()})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        payload["graph"] = build(folder, scale=a.scale)
        payload["graph"]["build_seconds"] = time.perf_counter() - t
        C.log(f"large_graph: graph {payload['graph']}")
        env = dict(os.environ, JAXCLP_XLA_CACHE="off")
        if not a.skip_jaxclp:
            cmd = [str(Path(sys.executable).with_name("jaxclp")), "predict", "--graph", str(folder / "edges.npy"),
                   "--labels", str(folder / "labels.npy"), "--features", str(folder / "features.npy"),
                   "--method", "clp", "--out", str(folder / "pred.csv"), "--no-progress"]
            cmd += ["--time-limit", "none" if a.time_limit is None else str(a.time_limit)]
            if a.priors:
                cmd += ["--priors", a.priors]
            res = timed(cmd, env)
            if res["returncode"] == 0:
                res["accuracy"] = accuracy_of_predictions(folder / "pred.csv", folder)
            payload["jaxclp"] = res | {"time_limit": a.time_limit, "priors": a.priors}
            C.log(f"large_graph: jaxclp {res['wall']:.1f} s, {res['peak_gib']} GiB, acc {res.get('accuracy')}")
        if a.torch_python:
            script = Path(__file__).with_name("pyg_cs.py")
            res = timed([a.torch_python, str(script), str(folder)])
            if res["returncode"] == 0:
                res |= json.loads(res["stdout_tail"].strip().splitlines()[-1])
            payload["pyg_mlp_cs"] = res
            C.log(f"large_graph: PyG {res['wall']:.1f} s, {res['peak_gib']} GiB, acc {res.get('accuracy')}")
    payload["load_average_end"] = os.getloadavg()
    C.save_json(out, payload)
    out.with_suffix(".md").write_text(markdown(payload))
    return 0


def markdown(payload: dict) -> str:
    g = payload["graph"]
    rows = []
    jc = payload.get("jaxclp", {})
    flags = f"--time-limit {jc.get('time_limit')}" + (f" --priors {jc['priors']}" if jc.get("priors") else "")
    for key, label in (("jaxclp", f"jaxclp predict --method clp {flags}"),
                       ("pyg_mlp_cs", "PyG MLP + CorrectAndSmooth")):
        r = payload.get(key)
        if r:
            cpu = r.get("cpu") or _cpu_of(r.get("stderr_tail", ""))
            rows.append([label, f"{r['wall']:.1f}", f"{cpu:.1f}", f"{r['peak_gib']:.2f}" if r.get("peak_gib") else "-",
                         f"{r['accuracy']:.4f}" if r.get("accuracy") is not None else f"failed ({r['returncode']})"])
    return "\n".join([
        "# An ogbn-arxiv-shaped graph: `jaxclp predict` beside PyG's MLP + C&S", "",
        *([payload["note"], ""] if payload.get("note") else []),
        f"Command: `{payload['command']}`", "", C.machine_header_md(payload["machine"]), "",
        f"Graph: {g['nodes']} nodes, {g['undirected_edges']} undirected edges, {g['features']} dense features, "
        f"{g['classes']} classes (planted, edge homophily 0.3); {g['hidden']} nodes' labels hidden and scored. "
        f"Load average at start {payload['load_average_start'][0]:.1f}, at end {payload['load_average_end'][0]:.1f} "
        "(2 cores: anything above 2 is other work on the machine).", "",
        C.md_table(["what", "wall s (whole process)", "CPU s (user + sys)", "peak RSS GiB", "accuracy (hidden nodes)"],
                   rows), ""] + _sentence(jc))


def _sentence(res: dict) -> list[str]:
    """``jaxclp predict``'s sentence (which predictor made the labels, what was left out), from its output."""
    lines = [ln for ln in (res.get("stdout_tail") or "").splitlines() if ln.startswith("labels from")]
    return [f"`jaxclp predict` said: {lines[-1]}", ""] if lines else []


def _cpu_of(time_v_output: str) -> float:
    return sum(float(v) for v in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", time_v_output))


if __name__ == "__main__":
    sys.exit(main())
