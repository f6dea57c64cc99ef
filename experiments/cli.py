"""``jaxclp`` console command: parse the config, call the orchestrator. Nothing else lives here."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings
from pathlib import Path

import jax

from jaxclp.experiments import reproduce
from jaxclp.experiments.methods import METHODS, reporting
from jaxclp.experiments.runner import RESULTS_FILE, check_methods, is_writer, read_records, replacing_stale, run
from jaxclp.experiments.summary import plot_summary, write_summary
from jaxclp.datasets.fetch import DownloadError, user_cache_dir
from jaxclp.metrics import METRICS

ALL_METHODS = "mlp,link,lp,cs,clp_star,clp"
XLA_CACHE_ENV = "JAXCLP_XLA_CACHE"
XLA_CACHE_MIN_COMPILE_SECONDS = 0.0
"""Cache every executable: most of a run's ~130 compilations are small (20-150 ms) and were recompiled by every
process under JAX's default 1 s / our former 0.2 s threshold (warm ``jaxclp run`` on Texas 11.5 -> 7.9 s,
``benchmarks/results/compile_time.md``)."""


def xla_cache_dir(environ=None) -> Path | None:
    """JAX's persistent compilation cache for ``run``/``reproduce``: ``$JAXCLP_XLA_CACHE``, default
    ``<user cache dir>/xla``; ``off`` (or ``0``, ``none``, empty) disables it.

    Each (dataset shape, method) compiles once per machine instead of once per process (cold vs warm
    ``jaxclp run``: ``benchmarks/results/fixes.md``). ``bench`` never uses it (the benchmarks measure compile
    time).
    """
    v = (os.environ if environ is None else environ).get(XLA_CACHE_ENV)
    if v is not None and v.strip().lower() in ("", "0", "off", "none", "false", "no"):
        return None
    return Path(v).expanduser() if v else user_cache_dir() / "xla"


def _enable_xla_cache() -> None:
    path = xla_cache_dir()
    if path is not None:
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", XLA_CACHE_MIN_COMPILE_SECONDS)


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {v}")
    return v


def _open_fraction(text: str) -> float:
    """argparse type: a float in (0, 1)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1); got {v}")
    return v


def _nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0; got {v}")
    return v


def _split_arg(text: str) -> str:
    """argparse type: :func:`jaxclp.datasets.splits.parse_split` (a split kind, ``published`` or rates)."""
    from jaxclp.datasets.splits import parse_split

    try:
        return parse_split(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


PASS_THROUGH = ("anchors", "bench")
"""Subcommands whose arguments their own module parses (``jaxclp.experiments.anchors``, ``jaxclp.benchmarks.run``)."""


def _add_graph_source(parser) -> None:
    """``--dataset NAME | --graph FILE`` (required, exclusive) and the files of an edge-list ``--graph``."""
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="a registered dataset name; `jaxclp datasets` lists them")
    src.add_argument("--graph", metavar="PATH",
                     help="a graph the registry does not know: an .npz (Platonov et al. layout: node_features, "
                          "node_labels, edges, optional train/val/test_masks; or Shchur et al. CSR layout: "
                          "adj_*, attr_*, labels), an OGB node-property folder (raw/edge.csv.gz, "
                          "raw/node-label.csv.gz, optional raw/node-feat.csv.gz and split/<name>/), or an edge-list "
                          "CSV (then --labels is required; a label -1, '?', NA/nan/null/None or nothing after the "
                          "comma marks an unlabelled node). Text files may be gzip/bz2/xz compressed (edges.csv.gz)")
    parser.add_argument("--labels", metavar="FILE", help="labels file of an edge-list --graph (node id, label; or a "
                                                          ".npy array, one label per node, NaN/-1 unlabelled)")
    parser.add_argument("--features", metavar="FILE",
                        help="optional features file of an edge-list --graph: .npy, .npz (CSR), CSV (rows in node "
                             "order: by id for ids 0..n-1, else the labels file's row order; or, for non-integer "
                             "ids, a first column of node ids) or .json ({node id: [feature ids]})")
    parser.add_argument("--directed", action="store_true",
                        help="keep the edge direction of --graph (default: undirected, both directions stored)")
    parser.add_argument("--weighted", action="store_true",
                        help="the third column of an edge-list --graph is the edge weight (finite, >= 0)")


def _parser() -> argparse.ArgumentParser:
    import jaxclp

    p = argparse.ArgumentParser(prog="jaxclp", description="Compatible Label Propagation experiments.")
    p.add_argument("--version", action="version", version=f"jaxclp {jaxclp.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run methods on one dataset (or a graph file) and split")
    _add_graph_source(r)
    r.add_argument("--split", default="medium", type=_split_arg, metavar="SPLIT",
                   help="label rate: sparse (5/5/90), medium (10/10/80, default), dense (48/32/20) or your own "
                        "TRAIN/VAL/TEST rates (e.g. 60/20/20); or published: the dataset's masks (also the masks of "
                        "a --graph .npz)")
    r.add_argument("--methods", default=ALL_METHODS, help=f"comma list from {sorted(METHODS)}")
    r.add_argument("--runs", type=_positive_int, default=10, help="number of random splits (>= 1)")
    r.add_argument("--seed", type=int, default=0, help="base seed: split i uses seed + i")
    r.add_argument("--epochs", type=_positive_int, default=500,
                   help="maximal training epochs of the MLP and of the base predictors clp fits (>= 1; the GNN "
                        "methods keep 500)")
    r.add_argument("--out", default="results/runs")
    r.add_argument("--metric", choices=METRICS, default=None,
                   help="selection and test metric (default: the dataset's; accuracy for a --graph file): roc_auc is "
                        "binary ROC-AUC, for two-class graphs with rare positives")
    r.add_argument("--replace-stale", action="store_true",
                   help="move results of another configuration in --out (same dataset, split, method) to "
                        "results.stale.jsonl and recompute them, instead of refusing")
    r.add_argument("--data-root", default=None, help="dataset root (default $JAXCLP_DATA or user cache)")
    r.add_argument("--no-progress", action="store_true")
    dist = r.add_argument_group(
        "many processes (jax.distributed)",
        "start one `jaxclp run` per process with the same arguments and its own --process-id; every process "
        "runs the same work and only process 0 writes records and the summary")
    dist.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                      help="address of process 0's coordinator service (jax.distributed.initialize)")
    dist.add_argument("--num-processes", metavar="N", type=_positive_int, default=None,
                      help="number of processes of the job")
    dist.add_argument("--process-id", metavar="I", type=_nonnegative_int, default=None,
                      help="this process's index in 0..N-1")
    pr = sub.add_parser("predict", help="fit a method on every labelled node of a graph and predict all nodes "
                                        "(CSV + JSON)")
    _add_graph_source(pr)
    pr.add_argument("--method", default="clp", choices=sorted(METHODS),
                    help="the method (default clp: base predictor, variant and alpha chosen on validation)")
    pr.add_argument("--val-fraction", type=_open_fraction, default=0.2,
                    help="share of the labelled nodes held out to choose the configuration (default 0.2)")
    pr.add_argument("--seed", type=int, default=0, help="seed of the hold-out and of the fits")
    pr.add_argument("--epochs", type=_positive_int, default=500,
                    help="maximal training epochs of the MLP and of the base predictors")
    pr.add_argument("--out", required=True, metavar="FILE.csv",
                    help="predictions CSV (node, label, role, predicted, score_<class>...); FILE.json beside it "
                         "names the chosen configuration and its validation score")
    pr.add_argument("--metric", choices=METRICS, default=None,
                    help="validation metric of the choice (default: the dataset's; roc_auc: two classes)")
    pr.add_argument("--data-root", default=None, help="dataset root (default $JAXCLP_DATA or user cache)")
    pr.add_argument("--no-progress", action="store_true", help="no line per base predictor while clp fits them")
    q = sub.add_parser("reproduce", help="regenerate a table of results/")
    q.add_argument("target", choices=sorted(reproduce.TARGETS))
    q.add_argument("--out", default="results")
    q.add_argument("--runs", type=_positive_int, default=10)
    q.add_argument("--datasets", default=None, help="comma list overriding the target's datasets")
    q.add_argument("--data-root", default=None)
    q.add_argument("--splits", default=None,
                   help="comma list of split kinds to run, a subset of the target's (e.g. dense for table4)")
    q.add_argument("--replace-stale", action="store_true",
                   help="move results of another configuration in the target's folders to results.stale.jsonl "
                        "and recompute them, instead of refusing")
    s = sub.add_parser("summarize", help="write summary.md and summary.png for a results directory")
    s.add_argument("dir")
    d = sub.add_parser("datasets", help="list the registered datasets and whether each is cached")
    d.add_argument("--data-root", default=None, help="dataset root (default $JAXCLP_DATA or user cache)")
    # PASS_THROUGH subcommands: listed here for `jaxclp -h`; main() hands their arguments to their own parsers
    sub.add_parser("anchors", help="tuned GNNs on a graph's published splits vs Platonov et al.'s numbers "
                                   "(`jaxclp anchors -h`; python -m jaxclp.experiments.anchors)")
    sub.add_parser("bench", help="benchmarks (`jaxclp bench -h`; see benchmarks/)")
    return p


def datasets_table(data_root=None) -> str:
    """The registry as a table: name, nodes, classes (from the processed cache when present, else "?"),
    metric, whether the files are in the data root, description."""
    import numpy as np

    from jaxclp.datasets import REGISTRY
    from jaxclp.datasets.cache import cache_key, cache_path
    from jaxclp.datasets.fetch import data_root as resolve_root, processed_dir

    root = resolve_root(data_root)
    rows = [f"data root: {root}", "", f"{'name':<18} {'nodes':>7} {'classes':>7}  {'metric':<8}  {'cached':<7}  "
            "description"]
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        required = [fs for fs in spec.files.values() if not fs.optional]
        present = sum((root / fs.path).exists() for fs in required)
        cached = "yes" if present == len(required) else ("partial" if present else "no")
        nodes = classes = "?"
        try:
            key = cache_key(spec, root, dict(spec.options))
            cp = cache_path(processed_dir(), spec.name, key) if key else None
            if cp is not None and cp.exists():
                with np.load(cp, allow_pickle=False) as z:
                    meta = json.loads(bytes(z["meta"]).decode())
                nodes, classes = str(meta["num_nodes"]), str(meta["num_classes"])
        except Exception:  # a damaged entry: sizes unknown, the next load rebuilds it
            pass
        rows.append(f"{name:<18} {nodes:>7} {classes:>7}  {spec.metric:<8}  {cached:<7}  {spec.description}")
    rows += ["", "nodes/classes: from the processed cache (? until first loaded); cached: every required file "
             "is in the data root (else it is downloaded on first use). Synthetic: syn-1, syn-2, syn-3 "
             "(library only: jaxclp.datasets.load('syn-1', h=...))."]
    return "\n".join(rows)


class UserError(ValueError):
    """A CLI usage problem detected after parsing (printed as one line, exit 2)."""


def _one_line(err: BaseException) -> str:
    text = str(err) if str(err) else type(err).__name__
    if isinstance(err, FileNotFoundError) and err.filename and str(err.filename) not in text:
        text = f"{text}: {err.filename}"
    return " ".join(text.split())


def main(argv=None) -> int:
    """The ``jaxclp`` command. User errors (bad values, missing files, unknown names, results of another
    configuration) print one line ``jaxclp: error: ...`` to stderr and return 2, argparse's convention;
    set ``JAXCLP_TRACEBACK=1`` to get the traceback instead."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in PASS_THROUGH:
        # argparse's REMAINDER does not take a leading option (`jaxclp bench --quick`): these subcommands hand
        # everything after their name to their own parser
        a = argparse.Namespace(cmd=argv[0], rest=argv[1:])
    else:
        a = _parser().parse_args(argv)
    try:
        with _user_warnings():
            return _main(a, argv)
    except (ValueError, FileNotFoundError, NotADirectoryError, DownloadError) as err:
        if os.environ.get("JAXCLP_TRACEBACK"):
            raise
        print(f"jaxclp: error: {_one_line(err)}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _user_warnings():
    """Inside: the library's UserWarnings (e.g. a loader's "2 of 80 nodes are unlabelled") print as one line
    ``jaxclp: warning: ...`` instead of Python's "file:line: UserWarning" and the source line; other warnings keep
    Python's format."""
    default = warnings.formatwarning

    def fmt(message, category, filename, lineno, line=None):
        if category is UserWarning:
            return f"jaxclp: warning: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = fmt
    try:
        yield
    finally:
        warnings.formatwarning = default


def distributed_options(a) -> dict | None:
    """The ``jax.distributed.initialize`` arguments of ``run --coordinator/--num-processes/--process-id``
    (None when none is given).

    Raises:
        UserError: only some of the three given, ``--process-id`` not below ``--num-processes``, or
            ``--coordinator`` not ``HOST:PORT``.
    """
    opts = (("--coordinator", getattr(a, "coordinator", None)), ("--num-processes", getattr(a, "num_processes", None)),
            ("--process-id", getattr(a, "process_id", None)))
    given = [o for o, v in opts if v is not None]
    if not given:
        return None
    if len(given) != len(opts):
        missing = [o for o, v in opts if v is None]
        raise UserError(f"{', '.join(given)} also need(s) {', '.join(missing)} (a jax.distributed job needs "
                        f"--coordinator HOST:PORT, --num-processes N and --process-id I)")
    host, sep, port = a.coordinator.rpartition(":")
    if not (sep and host and port.isdigit()):
        raise UserError(f"--coordinator must be HOST:PORT; got {a.coordinator!r}")
    if a.process_id >= a.num_processes:
        raise UserError(f"--process-id must be in 0..{a.num_processes - 1} (--num-processes {a.num_processes}); "
                        f"got {a.process_id}")
    return {"coordinator_address": a.coordinator, "num_processes": a.num_processes, "process_id": a.process_id}


def _init_distributed(opts: dict) -> None:
    """``jax.distributed.initialize`` (before anything touches a device), with gloo CPU collectives so that
    host devices of different processes can exchange data."""
    if jax.config.jax_cpu_collectives_implementation in (None, "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**opts)


def _graph_source(a):
    """``--dataset`` (its name, a str) or ``--graph`` with its files (the loaded :class:`Dataset`); UserError for
    ``--labels``/``--features``/``--directed`` without ``--graph``."""
    if a.graph is None:
        extra = [o for o, v in (("--labels", a.labels), ("--features", a.features), ("--directed", a.directed),
                                ("--weighted", a.weighted)) if v]
        if extra:
            raise UserError(f"{', '.join(extra)} only apply to --graph FILE")
        return a.dataset
    from jaxclp.datasets import load_file

    return load_file(a.graph, labels=a.labels, features=a.features, directed=a.directed, weighted=a.weighted)


def _main(a, argv) -> int:
    if a.cmd == "run":
        opts = distributed_options(a)
        if opts is not None:
            _init_distributed(opts)
    if a.cmd in ("run", "reproduce", "anchors", "predict"):
        _enable_xla_cache()
    if a.cmd == "run":
        check_methods(a.methods.split(","))  # before any file is read (a large --graph takes a while to load)
        dataset = _graph_source(a)
        name = dataset if isinstance(dataset, str) else dataset.name
        if not isinstance(dataset, str) and is_writer():
            print(f"jaxclp: {dataset.describe()}", file=sys.stderr, flush=True)
        run(dataset, a.split, a.methods.split(","), a.runs, a.out, seed=a.seed, epochs=a.epochs,
            progress=not a.no_progress and is_writer(), argv=["jaxclp", *argv], data_root=a.data_root,
            replace_stale=a.replace_stale, metric=a.metric)
        if is_writer():
            print(write_summary(a.out, title=f"jaxclp run ({name}, {a.split})"))
            png = plot_summary(a.out, title=f"jaxclp run ({name}, {a.split})")
            if png is not None:
                print(png)
        else:
            print(f"jaxclp: process {jax.process_index()} of {jax.process_count()} done; process 0 writes the "
                  f"records and the summary", file=sys.stderr)
    elif a.cmd == "predict":
        from jaxclp.datasets import load
        from jaxclp.experiments.predict import predict, write_predictions

        dataset = _graph_source(a)
        if isinstance(dataset, str):
            dataset = load(dataset, root=a.data_root)
        dataset = dataset.with_metric(a.metric)
        n_lab = int((dataset.labels >= 0).sum())
        print(f"jaxclp: fitting {a.method} on {dataset.name} ({dataset.num_nodes} nodes, {n_lab} labelled, "
              f"{a.val_fraction:g} of them for validation)...", file=sys.stderr, flush=True)
        say = (lambda t: print(f"jaxclp: {a.method}: {t}", file=sys.stderr, flush=True)) if not a.no_progress else None
        with reporting(say):  # clp's base predictors, one line each (they take most of its time)
            pred = predict(dataset, a.method, val_fraction=a.val_fraction, seed=a.seed, epochs=a.epochs)
        csv_path, json_path = write_predictions(pred, a.out, argv=["jaxclp", *argv])
        n_unl = int((dataset.labels < 0).sum())
        print(f"{csv_path} ({dataset.num_nodes} nodes, {n_unl} unlabelled; {a.method} chose {pred.params} with "
              f"validation {dataset.metric} {pred.val_score:.4f} on {int(pred.val.sum())} nodes)\n{json_path}")
    elif a.cmd == "reproduce":
        datasets = a.datasets.split(",") if a.datasets else None
        kw = {}
        if a.splits is not None:
            if a.target not in reproduce.SPLITS or len(reproduce.SPLITS[a.target]) < 2:
                raise UserError(f"reproduce {a.target}: --splits is for the tables with several split kinds "
                                f"({', '.join(t for t, s in reproduce.SPLITS.items() if len(s) > 1)})")
            try:
                kw["splits"] = reproduce.pick_splits(a.target, [s for s in a.splits.split(",") if s])
            except ValueError as e:
                raise UserError(f"reproduce --splits: {e}") from None
        with replacing_stale(a.replace_stale):
            for path in reproduce.TARGETS[a.target](Path(a.out), runs=a.runs, datasets=datasets,
                                                    data_root=a.data_root, argv=["jaxclp", *argv], **kw):
                print(path)
    elif a.cmd == "summarize":
        d = Path(a.dir)
        if not d.is_dir():
            raise UserError(f"summarize: {d} is not a directory (give the --out folder of a run)")
        if not any(r.get("type") == "result" for r in read_records(d / RESULTS_FILE)):
            raise UserError(f"summarize: {d} holds no result records ({d / RESULTS_FILE} is missing or empty); "
                            f"run `jaxclp run --out {d} ...` first")
        print(write_summary(d))
        png = plot_summary(d)
        if png is not None:
            print(png)
    elif a.cmd == "datasets":
        print(datasets_table(a.data_root))
    elif a.cmd == "anchors":
        from jaxclp.experiments.anchors import main as anchors_main

        anchors_main(a.rest, prog="jaxclp anchors")
    elif a.cmd == "bench":
        from jaxclp.benchmarks.run import main as bench_main

        return bench_main(a.rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
