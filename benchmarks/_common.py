"""Shared helpers: machine facts, timing, CPU-contention monitor, result files, synthetic problems."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
"""The repository root (``benchmarks/_common.py`` -> the clone): the benchmarks read its records and
write under ``benchmarks/results``."""
RESULTS_DIR = REPO / "benchmarks" / "results"


def module_env(env: dict | None = None) -> dict:
    """``env`` (default ``os.environ``) with the clone's root first on ``PYTHONPATH``: a child process
    ``python -m benchmarks.NAME`` finds this package whatever its working directory."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def data_root() -> Path:
    """Where the benchmarks read the published dataset files, in place: ``$JAXCLP_DATA``, default
    ``../shared/datasets`` beside the repository."""
    return Path(os.environ.get("JAXCLP_DATA") or REPO.parent / "shared" / "datasets")


# --------------------------------------------------------------------------------------------- machine facts
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                return [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16") if f in flags]
    except OSError:
        pass
    return []


def torch_version() -> str | None:
    try:
        import torch  # noqa: F401
    except Exception:  # noqa: BLE001 - optional dependency, any import failure means "absent"
        return None
    return torch.__version__


def machine_info() -> dict:
    """Facts printed in every result header."""
    import jax
    import jaxlib
    import scipy

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "cpu_model": cpu_model(),
        "cpu_flags": cpu_flags(),
        "logical_cores": os.cpu_count(),
        "usable_cores": affinity,
        "mem_total_gib": mem_total_gib(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.config.jax_enable_x64),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "torch": torch_version(),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "loadavg_at_start": list(os.getloadavg()),
    }


def machine_header_md(info: dict) -> str:
    return (f"Machine: {info['cpu_model']} ({', '.join(info['cpu_flags'])}), {info['usable_cores']} usable cores, "
            f"{info['mem_total_gib']} GiB RAM; jax {info['jax']} (jaxlib {info['jaxlib']}), backend "
            f"{info['backend']}, x64={info['x64']}; numpy {info['numpy']}, scipy {info['scipy']}, "
            f"torch {info['torch'] or 'absent'}; python {info['python']}; run {info['date_utc']} UTC; "
            f"load average at start {info['loadavg_at_start'][0]:.2f}.")


# --------------------------------------------------------------------------------------------- contention
def _proc_stat_busy() -> tuple[float, float]:
    """(busy seconds of all CPUs, wall seconds) from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0, time.monotonic()
    vals = [int(x) for x in fields]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(vals[:8]) - idle) / hz, time.monotonic()


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuMonitor:
    """Measures the CPU time used by OTHER processes while a block runs ("foreign cores").

    ``foreign_cores = (busy CPU seconds of the machine - our CPU seconds) / wall seconds``. On this shared
    2-core machine other jobs may run at the same time; every timing records how contended it was.
    """

    def __enter__(self):
        self.busy0, self.t0 = _proc_stat_busy()
        self.own0 = _own_cpu()
        return self

    def __exit__(self, *exc):
        self.busy1, self.t1 = _proc_stat_busy()
        self.own1 = _own_cpu()
        return False

    @property
    def foreign_cores(self) -> float:
        wall = max(self.t1 - self.t0, 1e-9)
        return max(0.0, ((self.busy1 - self.busy0) - (self.own1 - self.own0)) / wall)


def foreign_load(window: float = 0.5) -> float:
    with CpuMonitor() as mon:
        time.sleep(window)
    return mon.foreign_cores


_BUSY = {"streak": 0}


def wait_quiet(threshold: float = 0.3, max_wait: float = 60.0, window: float = 0.25) -> dict:
    """Waits (at most ``max_wait`` s) until other processes use < ``threshold`` cores. Returns what it saw.

    After a wait that timed out (the machine stays busy) the following waits are cut to 2 s, so a long
    contended period costs little extra time; the first quiet observation restores the full wait.
    """
    t0 = time.monotonic()
    limit = max_wait if _BUSY["streak"] == 0 else min(max_wait, 2.0)
    while True:
        f = foreign_load(window)
        if f < threshold:
            _BUSY["streak"] = 0
            break
        if time.monotonic() - t0 > limit:
            _BUSY["streak"] += 1
            break
    return {"waited_s": round(time.monotonic() - t0, 2), "foreign_cores": round(f, 3), "quiet": f < threshold}


# --------------------------------------------------------------------------------------------- timing
@dataclasses.dataclass
class Timing:
    """Steady-state timing of a call (seconds)."""

    median: float
    min: float
    max: float
    runs: int
    first_call: float | None = None  # includes tracing + compilation
    compile: float | None = None  # explicit AOT compile time, or first_call - median
    foreign_cores: float | None = None  # CPU used by other processes during the timed runs
    times: list = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["times"] = [round(t, 6) for t in self.times]
        return d

    def into(self, row: dict, prefix: str) -> dict:
        """Records this timing in a result row as ``<prefix>_s`` (median), ``<prefix>_min_s`` and
        ``<prefix>_foreign_cores``; returns the row."""
        row[f"{prefix}_s"], row[f"{prefix}_min_s"] = self.median, self.min
        row[f"{prefix}_foreign_cores"] = self.foreign_cores
        return row


def _block(x):
    import jax

    return jax.block_until_ready(x)


def time_call(fn: Callable[[], Any], *, repeats: int = 7, warmup: int = 1, budget_s: float | None = None,
              min_repeats: int = 3, sync: Callable[[Any], Any] = _block, first_call: bool = True,
              quiet: float | None = None) -> tuple[Timing, Any]:
    """Times ``fn()`` (no arguments): the first call is timed separately (compile), then ``warmup`` more
    untimed calls, then up to ``repeats`` timed calls (fewer if ``budget_s`` would be exceeded, never fewer
    than ``min_repeats``). Results are synchronized with ``jax.block_until_ready``.

    Returns:
        ``(Timing, last result)``.
    """
    first = None
    out = None
    if first_call:
        t = time.perf_counter()
        out = sync(fn())
        first = time.perf_counter() - t
        warmup = max(0, warmup - 1) if warmup else 0
    for _ in range(warmup):
        out = sync(fn())
    if quiet is not None:
        wait_quiet(threshold=quiet, max_wait=20.0)
    times = []
    with CpuMonitor() as mon:
        while True:
            t = time.perf_counter()
            out = sync(fn())
            times.append(time.perf_counter() - t)
            if len(times) >= repeats:
                break
            if budget_s is not None and len(times) >= min_repeats and sum(times) > budget_s:
                break
    med = statistics.median(times)
    comp = None if first is None else max(0.0, first - med)
    return Timing(median=med, min=min(times), max=max(times), runs=len(times), first_call=first, compile=comp,
                  foreign_cores=round(mon.foreign_cores, 3), times=times), out


def aot_compile_time(jitted, *args, **kwargs) -> tuple[float, Any]:
    """Seconds to lower + compile ``jitted`` for these arguments (ahead of time), and the compiled callable."""
    t = time.perf_counter()
    compiled = jitted.lower(*args, **kwargs).compile()
    return time.perf_counter() - t, compiled


# --------------------------------------------------------------------------------------------- files
def out_dir(path: str | os.PathLike | None = None) -> Path:
    p = Path(path) if path else RESULTS_DIR
    p.mkdir(parents=True, exist_ok=True)
    return p


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return None if not math.isfinite(v) else v
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if dataclasses.is_dataclass(x):
        return _jsonable(dataclasses.asdict(x))
    return x


def save_json(path: Path, payload: dict) -> Path:
    path.write_text(json.dumps(_jsonable(payload), indent=1))
    return path


def save_report(name: str, payload: dict, markdown: str) -> Path:
    """Writes ``RESULTS_DIR/<name>.json`` (``payload``) and ``RESULTS_DIR/<name>.md`` (``markdown``), prints the
    markdown and returns the JSON file's path."""
    dest = RESULTS_DIR / f"{name}.json"
    save_json(dest, payload)
    dest.with_suffix(".md").write_text(markdown)
    print(markdown)
    return dest


def load_json(path: Path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            if v == 0:
                return "0"
            a = abs(v)
            if a >= 100:
                return f"{v:.0f}"
            if a >= 1:
                return f"{v:.3g}"
            return f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, file=sys.stderr, flush=True)


def src_arguments(argv, doc: str, quick: str):
    """The ``--src DIR`` / ``--quick`` arguments of a benchmark that measures a checkout's ``src`` folder:
    ``(args, src, checkout)``, ``checkout`` the source tree's last commit (hash and subject, 100 characters)."""
    import argparse

    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--src", default=str(REPO / "src"), help="the src folder of the checkout to measure")
    p.add_argument("--quick", action="store_true", help=quick)
    args = p.parse_args(argv)
    src = Path(args.src).resolve()
    return args, src, checkout_of(src)


def quick_or_report(name: str, payload: dict, markdown: Callable[[dict], str], quick: bool) -> int:
    """The end of a benchmark's ``main``: a ``--quick`` smoke run prints its markdown; a full run writes
    ``benchmarks/results/<name>.{json,md}``. Returns the exit status (0)."""
    if quick:
        print(markdown(payload))
    else:
        save_report(name, payload, markdown(payload))
    return 0


def sizes_main(name: str, doc: str, argv, measure: Callable, markdown: Callable[[dict], str], full: tuple,
               quick: tuple) -> int:
    """``main`` of a benchmark that times a checkout's ``src`` (``--src``) over graph sizes with repeated pairs:
    ``measure(src, sizes, repeats)`` with ``full = (sizes, repeats)``, or ``quick``'s with ``--quick`` (printed
    only); the payload adds the command, the checkout, the machine and ``repeats``. Returns the exit status."""
    a, src, checkout = src_arguments(argv, doc, "one small graph, one pair (a smoke run; prints only)")
    sizes, repeats = quick if a.quick else full
    payload = dict(command=command_line(name, argv), checkout=checkout, machine=machine_info(), repeats=repeats,
                   **measure(src, sizes, repeats))
    return quick_or_report(name, payload, markdown, a.quick)


def command_line(name: str, argv) -> str:
    """``python -m benchmarks.<name> ARGS`` as the benchmark was called (``argv`` None: the process's)."""
    return f"python -m benchmarks.{name} " + " ".join(argv if argv is not None else sys.argv[1:])


def checkout_of(src: Path) -> str:
    """The last commit (short hash and subject, 100 characters) of the git tree holding ``src``."""
    return subprocess.run(["git", "-C", str(src), "log", "-1", "--format=%h %s"], capture_output=True,
                          text=True).stdout.strip()[:100]


def git_describe(repo: Path) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


# --------------------------------------------------------------------------------------------- synthetic data
def compat_matrix(k: int, homophily: float) -> np.ndarray:
    """(K, K) class-compatibility of the generator: ``homophily`` on the diagonal, the rest spread over a
    shifted band (class c links mostly to c+1), so the graph is heterophilous for small ``homophily``."""
    if k == 1:
        return np.ones((1, 1))
    p = np.full((k, k), (1.0 - homophily) * 0.3 / max(k - 2, 1) if k > 2 else 0.0)
    np.fill_diagonal(p, homophily)
    rest = 1.0 - p.sum(axis=1)
    for c in range(k):
        p[c, (c + 1) % k] += rest[c]
    return p / p.sum(axis=1, keepdims=True)


def synthetic_edges(n: int, avg_degree: float, k: int, *, homophily: float = 0.2, seed: int = 0):
    """Random graph with planted classes: ``n * avg_degree / 2`` undirected edges whose endpoints' classes
    follow :func:`compat_matrix`. Returns ``(senders, receivers, labels)`` (int64, one direction only)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=k)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    m_half = int(round(n * avg_degree / 2))
    src = rng.integers(0, n, m_half)
    cdf = np.cumsum(compat_matrix(k, homophily), axis=1)
    u = rng.random(m_half)
    tcls = (u[:, None] > cdf[labels[src]]).sum(axis=1).clip(0, k - 1)
    pick = offsets[tcls] + (rng.random(m_half) * np.maximum(counts[tcls], 1)).astype(np.int64)
    dst = order[np.minimum(pick, n - 1)]
    return src.astype(np.int64), dst.astype(np.int64), labels.astype(np.int32)


def fast_graph(src, dst, n: int, *, self_loops: str = "drop"):
    """Symmetrized, deduplicated :class:`jaxclp.Graph` built with one argsort (what
    ``Graph.from_edge_index(..., symmetrize=True)`` returns, but much faster for 10^7+ edges)."""
    import jax.numpy as jnp

    from jaxclp.graph import Graph
    from jaxclp.sparse import host_row_pointers

    s = np.concatenate([src, dst])
    r = np.concatenate([dst, src])
    keep = s != r
    s, r = s[keep], r[keep]
    key = np.unique(r.astype(np.int64) * n + s)
    if self_loops == "add":
        key = np.union1d(key, np.arange(n, dtype=np.int64) * (n + 1))
    r, s = np.divmod(key, n)
    w = np.ones(s.shape[0], np.float32)
    return Graph(senders=jnp.asarray(s, dtype=jnp.int32), receivers=jnp.asarray(r, dtype=jnp.int32),
                 weights=jnp.asarray(w), num_nodes=int(n), symmetric=True,
                 indptr=host_row_pointers(r, int(n)))


@dataclasses.dataclass
class Problem:
    graph: Any
    labels: np.ndarray
    train_mask: np.ndarray
    prior: Any  # (n, K) float32 jax array
    b0: Any
    H: Any
    num_classes: int
    avg_degree: float
    seed: int

    @property
    def n(self) -> int:
        return self.graph.num_nodes

    @property
    def m(self) -> int:
        return self.graph.num_edges


def synthetic_prior(labels: np.ndarray, k: int, *, strength: float = 1.0, seed: int = 0) -> np.ndarray:
    """A noisy 'MLP' prior: softmax(N(0,1) + strength * onehot(label)) (about 40-60% accuracy)."""
    rng = np.random.default_rng(seed + 1)
    logits = rng.standard_normal((labels.shape[0], k)).astype(np.float32)
    logits[np.arange(labels.shape[0]), labels] += strength
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def make_problem(n: int, avg_degree: float, k: int, *, seed: int = 0, homophily: float = 0.2,
                 train_frac: float = 0.1, self_loops: str = "drop") -> Problem:
    """A synthetic CLP problem: graph, labels, train mask, prior D, b0 and H estimated by jaxclp."""
    import jax.numpy as jnp

    import jaxclp

    src, dst, labels = synthetic_edges(n, avg_degree, k, homophily=homophily, seed=seed)
    graph = fast_graph(src, dst, n, self_loops=self_loops)
    rng = np.random.default_rng(seed + 2)
    train = rng.random(n) < train_frac
    train[rng.integers(0, n)] = True
    prior = jnp.asarray(synthetic_prior(labels, k, seed=seed))
    lab = jnp.asarray(labels)
    tm = jnp.asarray(train)
    b0 = jaxclp.initial_beliefs(prior, lab, tm)
    H, _ = jaxclp.estimate_compatibility(graph, prior, lab, tm)
    return Problem(graph=graph, labels=labels, train_mask=train, prior=prior, b0=b0, H=H, num_classes=k,
                   avg_degree=avg_degree, seed=seed)


def fit_power_law(x: Sequence[float], y: Sequence[float]) -> dict:
    """Least-squares fit of ``log y = a + b log x``: returns exponent b, prefactor and R^2."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    if lx.size < 2:
        return {"exponent": None, "prefactor": None, "r2": None}
    b, a = np.polyfit(lx, ly, 1)
    pred = a + b * lx
    ss = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float(((ly - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    return {"exponent": float(b), "prefactor": float(math.exp(a)), "r2": r2}


def save_figure(fig, path: Path, ax=None) -> str:
    """Legend on ``ax`` (when it has labelled artists), tight layout, PNG at 110 dpi, close. Returns the file name."""
    import matplotlib.pyplot as plt

    if ax is not None and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path).name


def sections_main(name: str, doc: str, sections: dict, full: dict, quick: dict,
                  write_markdown: Callable[[Path, dict], None], argv=None, out=None) -> dict:
    """The ``main`` of a benchmark made of sections: parses ``[--quick] [--out DIR]``, runs every
    ``sections[key](cfg)`` in order (``cfg`` = ``quick`` or ``full``) into ``payload[key]`` and writes the
    results (:func:`write_results`)."""
    import argparse

    ap = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    args = ap.parse_args(argv)
    od = out_dir(args.out)
    t0 = time.time()
    cfg = quick if args.quick else full
    payload = {"benchmark": name, "quick": args.quick, "machine": machine_info(), "config": cfg}
    for key, fn in sections.items():
        payload[key] = fn(cfg)
    return write_results(od, name, payload, write_markdown, t0)


def write_results(od: Path, name: str, payload: dict, write_markdown: Callable[[Path, dict], None],
                  t0: float) -> dict:
    """Writes ``od/<name>.json`` and ``od/<name>.md`` (via ``write_markdown``) and logs the elapsed time."""
    payload["elapsed_s"] = time.time() - t0
    save_json(od / f"{name}.json", payload)
    write_markdown(od / f"{name}.md", payload)
    log(f"{name}: wrote {od / (name + '.json')} and {name}.md ({payload['elapsed_s']:.0f} s)")
    return payload
