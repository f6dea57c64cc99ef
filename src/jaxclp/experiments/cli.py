"""``jaxclp`` console command: parse the config, call the orchestrator. Nothing else lives here."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import jax
import numpy as np

import jaxclp
from jaxclp.compilation_cache import CACHE_ENV, MIN_COMPILE_SECONDS, compilation_cache_dir, enable_compilation_cache
from jaxclp.datasets import REGISTRY, load, load_file
from jaxclp.datasets.cache import cache_key, cache_path
from jaxclp.datasets.fetch import data_root as resolve_root, processed_dir
from jaxclp.datasets.files import graph_name
from jaxclp.datasets.registry import canonical_name
from jaxclp.datasets.splits import parse_split
from jaxclp.experiments import reproduce
from jaxclp.experiments.anchors import main as anchors_main
from jaxclp.experiments.candidates import reporting
from jaxclp.experiments.chance import NOT_ABOVE, UNKNOWN_NOTE, beats_chance, chance_label, chance_percent, read_stored
from jaxclp.experiments.chance_rebuild import for_records
from jaxclp.experiments.methods import METHODS, clp_plan
from jaxclp.experiments import explanations
from jaxclp.experiments.explanations import explain_nodes, fit_model
from jaxclp.experiments.identity import data_identity
from jaxclp.experiments.predict import predict, previous_priors, write_predictions
from jaxclp.priors import PRIORS
from jaxclp.search import CLP_PRIOR_CANDIDATES
from jaxclp.experiments.progress import active_output, job, summary_target
from jaxclp.experiments.records import RESULTS_FILE, read_records, replacing_stale
from jaxclp.experiments.runner import (check_methods, check_priors, check_time_limit, is_writer, node_features, run,
                                       split_names)
from jaxclp.experiments.summary import plot_summary, write_summary
from jaxclp.datasets.fetch import DownloadError
from jaxclp.metrics import METRICS

ALL_METHODS = "mlp,link,lp,cs,clp_star,clp"
XLA_CACHE_ENV = CACHE_ENV
XLA_CACHE_MIN_COMPILE_SECONDS = MIN_COMPILE_SECONDS
"""See :data:`jaxclp.compilation_cache.MIN_COMPILE_SECONDS` (a benchmark may lower or raise it here)."""


def xla_cache_dir(environ=None) -> Path | None:
    """JAX's persistent compilation cache for ``run``/``reproduce``/``predict``/``anchors``:
    :func:`jaxclp.compilation_cache.compilation_cache_dir` (``$JAXCLP_XLA_CACHE``, default
    ``<user cache dir>/xla``; ``off`` disables it).

    Each (dataset shape, method) compiles once per machine instead of once per process (cold vs warm
    ``jaxclp run``: ``benchmarks/results/speedups.md``). The benchmarks never use it (they measure compile
    time).
    """
    return compilation_cache_dir(environ)


def _enable_xla_cache() -> None:
    """The commands' call of :func:`jaxclp.enable_compilation_cache` (the one implementation)."""
    enable_compilation_cache(min_compile_seconds=XLA_CACHE_MIN_COMPILE_SECONDS)


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return v


def _open_fraction(text: str) -> float:
    """argparse type: a float in (0, 1)."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1 (exclusive, e.g. 0.2); got {text!r}")
    return v


def _nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {text!r}")
    return v


def _split_arg(text: str) -> str:
    """argparse type: :func:`jaxclp.datasets.splits.parse_split` (a split kind, ``published`` or rates)."""

    try:
        return parse_split(text)
    except ValueError as err:
        listed = re.sub(r"\[('[^\]]*)\]", lambda m: m.group(1).replace("'", ""), str(err))  # ['a', 'b'] -> a, b
        raise argparse.ArgumentTypeError(listed.removeprefix("split ")) from None


def _value_error(option: str, problem: str) -> str:
    """The one line of a bad value of ``option`` from argparse's ``problem`` (``invalid choice: 'x' (choose from
    ...)``, ``invalid int value: 'x'``, an :class:`argparse.ArgumentTypeError`'s "must be ...; got 'x'"): the
    option, what it accepts and the value given."""
    problem = " ".join(problem.split())
    choice = re.fullmatch(r"invalid choice: (.*) \(choose from (.*)\)", problem)
    if choice:
        choices = ", ".join(c.strip().strip("'") for c in choice.group(2).split(","))
        return f"{option} must be one of {choices}; got {choice.group(1)}"
    typed = re.fullmatch(r"invalid (\w+) value: (.*)", problem)
    if typed:
        kind = {"int": "an integer", "float": "a number"}.get(typed.group(1), "a valid value")
        return f"{option} must be {kind}; got {typed.group(2)}"
    if problem.startswith("expected ") and "argument" in problem:
        return f"{option} needs a value ({problem})"
    if problem.startswith("not allowed with argument "):
        return f"{option} is not allowed with {problem.removeprefix('not allowed with argument ')} (give one of them)"
    return f"{option} {problem}"


class _Parser(argparse.ArgumentParser):
    """argparse with one line for a bad argument value: ``jaxclp run: error: --runs must be an integer >= 1; got
    '0'`` (the option, what it accepts, the value) and exit 2, like every other error of the command, instead of the
    usage block first; other parse errors (a missing or unknown option) keep argparse's usage line."""

    def error(self, message):
        m = re.match(r"argument (\S+?): (.*)\Z", message, re.S)
        if m is None:
            super().error(message)
        option = m.group(1).split("/")[-1]
        option = "the command" if option == "cmd" else option  # the subcommand's dest
        self.exit(2, f"{self.prog}: error: {_value_error(option, m.group(2))}\n")


METHOD_HELP = {
    "mlp": "MLP on the node features (1-3 layers, chosen on validation); the prior of the CLP methods",
    "link": "LINK: logistic regression on each node's adjacency row (structure only)",
    "linkx": "LINKX (Lim et al. 2021): MLPs on the adjacency and on the features, combined",
    "lp": "label propagation of the training labels (alpha chosen on validation)",
    "cs": "Correct & Smooth on the MLP prior (its alphas and scale chosen on validation)",
    "clp_star": "CLP*: the MLP prior propagated with the estimated compatibility matrix (alpha on validation)",
    "clp_paper": "CLP exactly as the paper: sym-normalized closed form on the MLP prior, alpha on validation",
    "clp_refined": "clp_paper with the compatibility matrix re-estimated once from the propagated beliefs",
    "clp_authors": "the CLP authors' own propagation (start, alpha, post-processing, layer on validation)",
    "clp_mlp": "CLP on the MLP prior, every variant (normalization, start, alpha, the authors' propagation) "
               "chosen on validation",
    "clp": "jaxclp's CLP (recommended): the best base predictor on validation (MLP, LINK, LINKX, GCN, H2GCN, tuned "
           "GCN, SAGE; --priors), then CLP's propagation on it, or the predictor alone where propagation does not "
           "help on validation",
    "clp_e2e": "clp_paper with the MLP trained through the closed-form CLP (end to end)",
    "gcn": "Kipf & Welling's 2-layer GCN (the paper's setup)",
    "gcn_tuned": "GCN and the tuned GCN grid (depth x residual + LayerNorm), chosen on validation",
    "h2gcn": "H2GCN (Zhu et al. 2020), a GNN for heterophily",
    "sage": "GraphSAGE (mean aggregator), tuned grid",
    "gat": "GAT (4 heads), tuned grid",
    "gat_sep": "GAT-sep (ego embedding kept apart from the neighbours'), tuned grid",
    "gcn_sep": "GCN-sep (ego embedding kept apart from the neighbours'), tuned grid",
}
"""One line per method of :data:`jaxclp.experiments.methods.METHODS` (``jaxclp run --help`` lists them)."""


def _help_width() -> int:

    return max(min(shutil.get_terminal_size().columns, 100) - 2, 40)


def _listing(title: str, rows: dict) -> str:
    """``title:`` then one wrapped line per ``name: text`` (a help epilog: the methods, the targets)."""

    pad = max(map(len, rows)) + 4
    return f"{title}:\n" + "\n".join(
        textwrap.fill(text, _help_width(), initial_indent=f"  {name:<{pad - 2}}", subsequent_indent=" " * pad)
        for name, text in rows.items())


def _paragraph(text: str) -> str:

    return textwrap.fill(text, _help_width())


def _method_lines() -> str:
    return _listing("methods", {m: METHOD_HELP.get(m, "") for m in sorted(METHODS)})


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default shown (``(default: X)``; an option whose default is None or off says in its text what
    happens without it); descriptions and epilogs (the method and target lists) kept as laid out."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("%(default)" in text or "(default: " in text or default is None or default is False
                or default is argparse.SUPPRESS or not action.option_strings):
            return text
        return text + " (default: %(default)s)"


PASS_THROUGH = ("anchors",)
"""Subcommands whose arguments their own module parses (``jaxclp.experiments.anchors``)."""


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
                                                          ".npy array, one label per node, NaN/-1 unlabelled; a CSV "
                                                          "with more columns: name them with --id-column and "
                                                          "--label-column); with an .npz or OGB --graph it replaces "
                                                          "the graph's own labels (ids: node indices 0..n-1; a node "
                                                          "not listed is unlabelled)")
    parser.add_argument("--id-column", metavar="NAME", default=None,
                        help="header name of the node id column of a multi-column --labels CSV (the ids the edge "
                             "list uses; default: the first column)")
    parser.add_argument("--label-column", metavar="NAME", default=None,
                        help="header name of the label column of a multi-column --labels CSV (default: the other "
                             "column of a two-column file)")
    parser.add_argument("--features", metavar="FILE",
                        help="optional features file of an edge-list --graph: .npy, .npz (CSR), CSV (rows in node "
                             "order: by id for ids 0..n-1, else the labels file's row order; or, for non-integer "
                             "ids, a first column of node ids) or .json ({node id: [feature ids]}) (default: none; the models "
                             "then see log(degree + 1))")
    parser.add_argument("--directed", action="store_true",
                        help="keep the edge direction of --graph (default: undirected, both directions stored)")
    parser.add_argument("--weighted", action="store_true",
                        help="the third column of an edge-list --graph is the edge weight (finite, >= 0; default: "
                             "unweighted, further columns ignored)")
    parser.add_argument("--name", metavar="NAME", default=None,
                        help="the graph's name in the records, the summary and the predictions (default: the "
                             "--graph file's name without extensions and an _edges suffix, or its folder's name for "
                             "a generic file name such as edges.csv)")


def _parser() -> argparse.ArgumentParser:

    p = _Parser(prog="jaxclp", description="Compatible Label Propagation experiments.",
                                formatter_class=_HelpFormatter)
    p.add_argument("--version", action="version", version=f"jaxclp {jaxclp.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser(
        "run", help="run methods on one dataset (or a graph file) and split", formatter_class=_HelpFormatter,
        description=_paragraph(
            "Run methods on random (or published) splits of one graph: every method chooses its configuration on "
            "the validation nodes and is scored on the test nodes. Writes one record per split and method to "
            "DIR/results.jsonl, then DIR/summary.md and DIR/summary.png, and prints the methods' ranking. Ctrl-C "
            "stops within seconds, keeping every finished record (and their summary); the same command resumes."),
        epilog=_method_lines())
    _add_graph_source(r)
    r.add_argument("--split", default="medium", type=_split_arg, metavar="SPLIT",
                   help="label rate: sparse (5/5/90), medium (10/10/80), dense (48/32/20) or your own "
                        "TRAIN/VAL/TEST rates (e.g. 60/20/20); or published: the dataset's masks (also the masks of "
                        "a --graph .npz)")
    r.add_argument("--methods", default=ALL_METHODS, help="comma list of methods (listed below)")
    r.add_argument("--runs", type=_positive_int, default=10, help="number of random splits (>= 1)")
    r.add_argument("--seed", type=int, default=0, help="base seed: split i uses seed + i")
    r.add_argument("--epochs", type=_positive_int, default=500,
                   help="maximal training epochs of the MLP and of the base predictors clp fits (>= 1; the GNN "
                        "methods keep 500)")
    r.add_argument("--out", default="results/runs", metavar="DIR",
                   help="folder of the records (results.jsonl) and the summary; a run resumes the records it holds")
    r.add_argument("--metric", choices=METRICS, default=None,
                   help="selection and test metric: roc_auc is binary ROC-AUC (two classes only) (default: the "
                        "dataset's published one; for a --graph file roc_auc for every two-class graph, as Platonov "
                        "et al. and OGB score binary tasks, else accuracy)")
    _add_cost_options(r, "per split", RUN_TIME_LIMIT)
    r.add_argument("--replace-stale", action="store_true",
                   help="move results of another configuration in --out (same dataset, split, method) to "
                        "results.stale.jsonl and recompute them, instead of refusing (default: refuse)")
    r.add_argument("--data-root", default=None, help=_DATA_ROOT_HELP)
    r.add_argument("--no-progress", action="store_true",
                   help="no progress bar and no line per finished dataset (the result lines stay; default: shown)")
    dist = r.add_argument_group(
        "many processes (jax.distributed)",
        _paragraph("start one `jaxclp run` per process with the same arguments and its own --process-id; every "
                   "process runs the same work and only process 0 writes records and the summary (default: one "
                   "process, none of these options)"))
    dist.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                      help="address of process 0's coordinator service (jax.distributed.initialize; default: "
                           "none, a single process)")
    dist.add_argument("--num-processes", metavar="N", type=_positive_int, default=None,
                      help="number of processes of the job (default: none, a single process)")
    dist.add_argument("--process-id", metavar="I", type=_nonnegative_int, default=None,
                      help="this process's index in 0..N-1 (default: none, a single process)")
    pr = sub.add_parser("predict", help="fit a method on every labelled node of a graph and predict all nodes "
                                        "(CSV + JSON)", formatter_class=_HelpFormatter,
                        description=_paragraph(
                            "Label the unlabelled nodes of a graph: the method is fitted on the labelled nodes (a "
                            "share held out to choose its configuration) and predicts every node. Writes FILE.csv "
                            "and FILE.json and says in a sentence which predictor made the labels."),
                        epilog=_method_lines())
    _add_graph_source(pr)
    pr.add_argument("--method", default="clp", choices=sorted(METHODS), metavar="METHOD",
                    help="the method, listed below (clp: base predictor, variant and alpha chosen on validation)")
    pr.add_argument("--val-fraction", type=_open_fraction, default=0.2,
                    help="share of the labelled nodes held out to choose the configuration")
    pr.add_argument("--seed", type=int, default=0, help="seed of the hold-out and of the fits")
    pr.add_argument("--epochs", type=_positive_int, default=500,
                    help="maximal training epochs of the MLP and of the base predictors")
    pr.add_argument("--out", required=True, metavar="FILE.csv",
                    help="predictions CSV (node, label, role, predicted, score_<class>...); FILE.json beside it "
                         "names the chosen configuration and its validation score")
    pr.add_argument("--metric", choices=METRICS, default=None,
                    help="validation metric of the choice (default: the dataset's published one; for a --graph "
                         "file roc_auc for every two-class graph, else accuracy)")
    _add_cost_options(pr, "for the whole fit", PREDICT_TIME_LIMIT)
    pr.add_argument("--data-root", default=None, help=_DATA_ROOT_HELP)
    pr.add_argument("--no-progress", action="store_true",
                    help="no line per base predictor while clp fits them (default: shown)")
    pr.add_argument("--previous", metavar="DIR", default=None,
                    help="the --out folder of an earlier `jaxclp run` on this graph: clp tries only the base "
                         "predictors that run's clp chose on its validation nodes (instead of --priors; default: "
                         "search them all)")
    pr.add_argument("--no-refit", action="store_true",
                    help="keep the chosen configuration's scores propagated from the training nodes (default: clp, "
                         "cs and lp propagate again from every labelled node, validation included, after the choice)")
    ex = sub.add_parser("explain", help="why a node got its label: each labelled node's exact share of its score "
                                        "(words + JSON)", formatter_class=_HelpFormatter,
                        description=_paragraph(
                            "Explain CLP's labels exactly: jaxclp.CLP (closed form) is fitted on the labelled nodes "
                            "(a share held out to choose its base predictor and configuration), and for each --node "
                            "its score per class is split into one term per labelled node and the prior's term (the "
                            "base predictor's share), summing to the score. H and the edge weights are held fixed; "
                            "the base predictor's own reasoning is one term. Prints a sentence per node and writes "
                            "--json FILE."))
    _add_graph_source(ex)
    ex.add_argument("--node", action="append", required=True, metavar="ID",
                    help="a node to explain, its id as the graph's files name it (repeat for several)")
    ex.add_argument("--top", type=_nonnegative_int, default=5,
                    help="labelled nodes listed per class, largest share first (0: all)")
    ex.add_argument("--json", metavar="FILE", default=None,
                    help="write the explanation as JSON: per node its predicted class, score per class and per "
                         "class the top labelled nodes {node, label, hops, contribution} and the prior's term "
                         "(default: none)")
    ex.add_argument("--plot", metavar="FILE.png", default=None,
                    help="draw each node's neighbourhood (2 hops, at most 60 nodes) into a PNG: labelled nodes "
                         "coloured by label and sized by their share of the node's score, the node starred "
                         "(default: none)")
    ex.add_argument("--val-fraction", type=_open_fraction, default=0.2,
                    help="share of the labelled nodes held out to choose the configuration")
    ex.add_argument("--seed", type=int, default=0, help="seed of the hold-out and of the fits")
    ex.add_argument("--epochs", type=_positive_int, default=500,
                    help="maximal training epochs of the base predictors")
    ex.add_argument("--priors", metavar="NAMES", default=None,
                    help="comma list of the base predictors CLP may choose from (default: mlp,link)")
    ex.add_argument("--time-limit", metavar="SECONDS", type=_time_limit_arg, default=None,
                    help="seconds the fit of the base predictors may spend; 'none' for no limit (default: no "
                         "limit, so that two runs give the same explanation)")
    ex.add_argument("--exact-shapes", action="store_true", help=EXACT_SHAPES_HELP)
    ex.add_argument("--data-root", default=None, help=_DATA_ROOT_HELP)
    q = sub.add_parser("reproduce", help="regenerate a table or figure of results/", formatter_class=_HelpFormatter,
                       description=_paragraph(
                           "Regenerate one of the paper's tables or figures (records under DIR/<target>/). Ctrl-C "
                           "stops within seconds, keeping every finished record (and their summary); the same "
                           "command resumes."),
                       epilog=_listing("targets", {t: reproduce.target_help(t) for t in sorted(reproduce.TARGETS)}))
    q.add_argument("target", choices=sorted(reproduce.TARGETS), metavar="TARGET", help="what to regenerate "
                   "(listed below)")
    q.add_argument("--out", default="results", metavar="DIR", help="folder of the targets' folders")
    q.add_argument("--runs", type=_positive_int, default=10, help="random splits per dataset and split kind")
    q.add_argument("--datasets", default=None,
                   help="comma list overriding the target's datasets (default: all of the target's)")
    q.add_argument("--data-root", default=None, help=_DATA_ROOT_HELP)
    q.add_argument("--splits", default=None,
                   help="comma list of split kinds to run, a subset of the target's (e.g. dense for table4; default: "
                        "all of the target's)")
    q.add_argument("--replace-stale", action="store_true",
                   help="move results of another configuration in the target's folders to results.stale.jsonl "
                        "and recompute them, instead of refusing (default: refuse)")
    s = sub.add_parser("summarize", help="write summary.md and summary.png for a results directory",
                       formatter_class=_HelpFormatter)
    s.add_argument("dir", help="the --out folder of a run (holding results.jsonl)")
    d = sub.add_parser("datasets", help="list the registered datasets and whether each is cached",
                       formatter_class=_HelpFormatter)
    d.add_argument("--data-root", default=None, help=_DATA_ROOT_HELP)
    # PASS_THROUGH subcommands: listed here for `jaxclp -h`; main() hands their arguments to their own parsers
    sub.add_parser("anchors", help="tuned GNNs on a graph's published splits vs Platonov et al.'s numbers "
                                   "(`jaxclp anchors -h`; python -m jaxclp.experiments.anchors)")
    return p


_DATA_ROOT_HELP = "dataset root (default: $JAXCLP_DATA, else the user cache folder, e.g. ~/.cache/jaxclp)"


class _DefaultLimit(float):
    """A ``--time-limit`` the user did not give (the subcommand's default): a float that says so, so that the
    warning about cost options no method reads is only given for options typed."""


RUN_TIME_LIMIT = 60.0
"""``jaxclp run``'s default ``--time-limit`` for ``clp`` (seconds per split; :data:`PREDICT_TIME_LIMIT` is one
``predict`` fit's): a split of ``run`` costs what a ``predict`` costs. Applied only where ``clp`` is among the methods
(the other methods' records keep a configuration without a limit); the records name what it left out and the
configuration holds it; ``jaxclp reproduce`` (the tables) runs without a limit; ``--time-limit none`` lifts it."""

PREDICT_TIME_LIMIT = 60.0
"""``jaxclp predict``'s default ``--time-limit`` (seconds for clp's fit: its base predictors, then CLP's costlier
candidates on the chosen one): the MLP, LINK, LINKX, GCN and H2GCN fit within it on graphs of up to ~100k nodes on
2 cores, the tuned GNNs' grids (8 fits each, one program) on small and medium graphs
(``benchmarks/results/cost_after_r2.md``: 3-65 s per split and grid on the medium table's graphs); the MLP's
training stops where a quarter of the limit runs out (:data:`jaxclp.search.MLP_TIME_SHARE`); one
closed-form CLP variant is always computed, the other variants and the spectral, per-step L1 and authors' candidates
while they fit (``benchmarks/results/grid_budget.md``);
``--time-limit none`` lifts it."""


def _time_limit_arg(text: str):
    """``--time-limit``: seconds (a finite number >= 0), or ``none``/``off`` for no limit."""
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (np.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be seconds (a number >= 0) or 'none' for no limit; got {text!r}")
    return v


EXACT_SHAPES_HELP = ("fit the models on the graph's own shapes, compiling their programs for this graph alone "
                     "(default: nodes and edges padded to shape buckets, so that graphs of similar size share "
                     "compiled programs, also across processes through the compilation cache; the same computation "
                     "up to rounding, which training can amplify: benchmarks/results/bucket_overhead.md)")


def _add_cost_options(parser, budget: str, time_limit: float | None = None) -> None:
    """``--priors``, ``--time-limit``, ``--exact-shapes`` and ``--plan``: what ``clp`` may try, how long it may take,
    how its programs are shaped, and its plan."""

    parser.add_argument("--priors", metavar="NAMES", default=None,
                        help="comma list of the base predictors clp may try, from "
                             f"{', '.join(sorted(set(PRIORS) | {'mlp'}))} (default: clp's own list: "
                             f"{', '.join(CLP_PRIOR_CANDIDATES)})")
    parser.add_argument("--time-limit", metavar="SECONDS", type=_time_limit_arg,
                        default=None if time_limit is None else _DefaultLimit(time_limit),
                        help=f"seconds clp may spend {budget}: the MLP prior's depths and training epochs within "
                             "a quarter of it (one depth always), base predictors cheap ones first, an expensive one "
                             "only "
                             "while it fits (one started stops training where the limit runs out), then CLP's "
                             "candidates while they fit (one closed-form variant always); "
                             "what was left out is named; 'none' for no limit (default: "
                             + ("no limit)" if time_limit is None else f"{time_limit:g})"))
    parser.add_argument("--plan", action="store_true",
                        help="print clp's search plan for this graph (the MLP depths, base predictors and kinds of "
                             "CLP candidate in the order they run, their expected cost and seconds, what the time "
                             "limit would leave out) and exit without fitting anything (default: fit)")
    parser.add_argument("--exact-shapes", action="store_true", help=EXACT_SHAPES_HELP)


PRIOR_METHODS = ("clp",)
"""The methods that read ``--priors`` and ``--time-limit`` (:attr:`jaxclp.experiments.candidates.Context.base_priors`,
:attr:`~jaxclp.experiments.candidates.Context.time_limit`)."""


def _warn_unused_cost_options(a, methods) -> None:
    """One line when ``--priors``/``--time-limit`` are given but no method run reads them (they would only change
    the records' configuration)."""
    given = [o for o, v in (("--priors", a.priors), ("--time-limit", a.time_limit))
             if v is not None and not isinstance(v, _DefaultLimit)]
    if given and not set(methods) & set(PRIOR_METHODS):
        print(f"jaxclp: warning: {' and '.join(given)} only change{'s' if len(given) == 1 else ''} "
              f"{', '.join(PRIOR_METHODS)}'s choice of base "
              f"predictor; {', '.join(methods)} ignore{'s' if len(methods) == 1 else ''} "
              f"{'them' if len(given) > 1 else 'it'}", file=sys.stderr)


def check_out_folder(out, option: str = "--out") -> None:
    """Refuses an output folder that names an existing file (or lies under one): UserError naming it and the way
    out, before anything is computed."""
    p = Path(out)
    for q in (p, *p.parents):
        if q.exists() and not q.is_dir():
            where = "" if q == p else f" ({q} is a file)"
            raise UserError(f"{option} {out} is not a folder{where}: run writes a folder (results.jsonl, "
                            f"summary.md); name a new or existing folder, e.g. {option} {p.with_suffix('')}_runs")


def check_out_file(out, option: str = "--out") -> None:
    """Refuses a predictions path that names an existing folder or lies under a file: UserError with the way out."""
    p = Path(out)
    if p.is_dir():
        raise UserError(f"{option} {out} is a folder; name the predictions file, e.g. {option} {p / 'predictions.csv'}")
    for q in p.parents:
        if q.exists() and not q.is_dir():
            raise UserError(f"{option} {out}: {q} is a file, not a folder; choose another path for the predictions")


def _user_graph_metric(ds, metric):
    """A user's graph with its metric: ``metric`` if given; else ROC-AUC for every two-class graph (Platonov et
    al.'s and OGB's rule for binary tasks: one metric whatever the class balance, so sibling graphs compare;
    accuracy rewards the constant guess on skewed ones), with a one-line note naming the rarer class's share and
    how to change it; accuracy for three or more classes. Registered datasets keep their published metric (this is
    only called for ``--graph``). Returns the dataset."""

    if metric is not None or ds.num_classes != 2:
        return ds.with_metric(metric)
    counts = np.asarray(ds.class_counts, dtype=float)
    share = counts / max(counts.sum(), 1.0)
    rare = int(np.argmin(share))
    print(f"jaxclp: note: {ds.name} has two classes ({100 * share[rare]:.0f}% of its labelled nodes are "
          f"{ds.label_values[rare]!s}): scoring ROC-AUC, as for every two-class graph (--metric accuracy to change "
          "it)", file=sys.stderr)
    return ds.with_metric("roc_auc")


METRIC_NAMES = {"accuracy": "accuracy", "roc_auc": "ROC-AUC"}


def ranking_text(out, dataset: str, split: str, methods) -> str:
    """The methods of ``out``'s records on (dataset, split) best first: test score mean ± std over the runs (in
    percent, the metric named), the best named in words; the chance reference of the metric (always the majority
    training class for accuracy, from the run's header record or ``chance.json`` beside the records; 50 for
    ROC-AUC: :mod:`jaxclp.experiments.chance`), with ``≤ chance`` on every method whose mean is not above it by more
    than its std; and which base predictors ``clp`` left out for time."""

    records = read_records(Path(out) / RESULTS_FILE)
    last = {}
    for r in records:
        if (r.get("type") == "result" and r.get("dataset") == dataset and r.get("split") == split
                and r.get("method") in methods):
            last[(r["method"], r["run"])] = r
    if not last:
        return f"no results for {dataset}/{split} in {out}"
    metric = next(iter(last.values())).get("metric", "accuracy")
    scores = {}
    for (m, _), r in sorted(last.items()):
        scores.setdefault(m, []).append(100.0 * r["test"])
    rank = sorted(scores, key=lambda m: -np.mean(scores[m]))
    mname = METRIC_NAMES.get(metric, metric)
    known, _ = for_records(records, stored=read_stored(out), compute=False)  # headers, else chance.json beside them
    chance = chance_percent(metric, sorted({i for _, i in last}), known.get((dataset, split)))
    below = set() if chance is None else {m for m in rank if not beats_chance(scores[m], chance)}

    def cell(m, words=False):
        v = np.asarray(scores[m])
        std = f" ± {v.std(ddof=1):.1f}" if v.size > 1 else ""
        runs = f"{v.size} run{'s' if v.size > 1 else ''}"
        return (f"{v.mean():.1f}{std} % test {mname} over {runs}" if words
                else f"{v.mean():.1f}{std}  (test {mname} %, {runs})" + (f"  {NOT_ABOVE}" if m in below else ""))

    several = len(scores[rank[0]]) > 1
    best_vs = (f"; not above chance ({chance:.1f})" if rank[0] in below
               else f", {np.mean(scores[rank[0]]) - chance:+.1f} over chance" if chance is not None else "")
    lines = [f"best on {dataset} ({split} split): {rank[0]}, {cell(rank[0], True)}"
             f"{' (mean ± std)' if several else ''}{best_vs}",
             f"ranking (test {mname} in %, mean ± std over the runs):"]
    lines += [f"  {k}. {m:<10} {cell(m)}" for k, m in enumerate(rank, start=1)]
    if chance is None:
        lines.append(UNKNOWN_NOTE)
    else:
        lines.append(f"  {chance_label(metric)}: {chance:.1f}")
        if below:
            names = ", ".join(m for m in rank if m in below)
            verb, its = ("is", "its") if len(below) == 1 else ("are", "their")
            lines.append(f"{NOT_ABOVE}: {len(below)} of {len(rank)} methods ({names}) {verb} not above chance by more "
                         f"than {its} std over the runs")
    skipped = {}
    for (m, _), r in last.items():
        for name in r.get("skipped") or ():
            skipped.setdefault((m, name), 0)
            skipped[(m, name)] += 1
    limit = next((r["config"].get("time_limit") for r in last.values() if r.get("config", {}).get("time_limit")),
                 None)
    for m in sorted({m for m, _ in skipped}):
        names = ", ".join(f"{n} ({c} of {len([1 for k in last if k[0] == m])} splits)"
                          for (mm, n), c in sorted(skipped.items()) if mm == m)
        lines.append(f"{m} left out {names} for the time limit"
                     + (f" of {limit:g} s per split" if limit else ""))
    return "\n".join(lines)


def datasets_table(data_root=None) -> str:
    """The registry as a table: name, nodes, classes (from the processed cache when present, else "?"),
    metric, whether the files are in the data root, description."""


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
        # argparse's REMAINDER does not take a leading option (`jaxclp anchors --datasets ...`): these subcommands hand
        # everything after their name to their own parser
        a = argparse.Namespace(cmd=argv[0], rest=argv[1:])
    else:
        a = _parser().parse_args(argv)
    try:
        with _user_warnings():
            return _main(a, argv)
    except KeyboardInterrupt:  # outside run/reproduce's handler (_interruptible): e.g. predict, datasets
        print("\njaxclp: interrupted", file=sys.stderr, flush=True)
        return INTERRUPT_EXIT
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


INTERRUPT_EXIT = 130
"""Exit status of an interrupted ``run``/``reproduce`` (128 + SIGINT, the shell's convention; also for SIGTERM)."""
INTERRUPT_DEADLINE = 10.0
"""Seconds the interrupt handler may take to write the summary before the process exits anyway."""


def _say_interrupted(folder: Path | None, summary: dict, keeps: bool = True) -> None:
    """What an interrupt does once the work is abandoned: the summary of the kept records (summary.md only: the
    plot imports matplotlib, seconds on a loaded machine) and the one line saying where they are (``keeps``
    False: a command that writes only at its end, ``predict``: that nothing was written). Runs on the watcher
    thread; never raises."""
    if not keeps:
        print("\njaxclp: interrupted: nothing was written (predict writes its files at the end)", file=sys.stderr,
              flush=True)
        return
    kept = 0
    if folder is not None:
        try:
            kept = sum(r.get("type") == "result" for r in read_records(Path(folder) / RESULTS_FILE))
            if kept:
                write_summary(folder, **summary)
        except Exception as err:  # noqa: BLE001 - the records are safe whatever the summary does
            print(f"jaxclp: warning: the summary of {folder} was not written ({_one_line(err)})", file=sys.stderr)
    where = f"{kept} records kept in {folder}" if folder is not None else "finished records are kept"
    print(f"\njaxclp: interrupted: {where}; run the same command to resume", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _interruptible(enabled: bool = True, keeps: bool = True):
    """Ctrl-C (SIGINT) and SIGTERM inside the block end the command within seconds, whatever it computes: one line
    ``jaxclp: interrupted: N records kept in DIR; run the same command to resume`` on stderr, summary.md of the
    records so far, exit status :data:`INTERRUPT_EXIT`, no traceback.

    A signal's C handler writes its number to a pipe (``signal.set_wakeup_fd``) even while the main thread is
    inside a long XLA computation (where a Python handler, hence ``KeyboardInterrupt``, would wait for it to
    return: 95 s measured); a watcher thread reads the pipe, writes the summary and ends the process
    with ``os._exit`` (records are whole lines, each written with one fsynced ``write``, so nothing is torn; the
    folder lock dies with the process). Only in the main thread (signals are delivered there) and on POSIX (on
    Windows the wakeup fd must be a socket): elsewhere a no-op, and Ctrl-C is :func:`main`'s KeyboardInterrupt.
    ``keeps`` False (``predict``): the line says that nothing was written.
    """

    if not enabled or os.name != "posix" or threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    handled = (signal.SIGINT, signal.SIGTERM)
    old_handlers = {sig: signal.getsignal(sig) for sig in handled}
    for sig in handled:
        signal.signal(sig, lambda signum, frame: None)  # the watcher thread acts; the main thread goes on
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    stop = threading.Event()

    def watch():
        while True:
            byte = os.read(read_fd, 1)
            if stop.is_set() or not byte:
                return
            if byte[0] in [int(sig) for sig in handled]:
                break
        threading.Timer(INTERRUPT_DEADLINE, os._exit, (INTERRUPT_EXIT,)).start()  # a stuck summary
        folder, summary = active_output()
        _say_interrupted(folder, summary, keeps)
        sys.stdout.flush()
        os._exit(INTERRUPT_EXIT)

    watcher = threading.Thread(target=watch, name="jaxclp-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_fd)
        for sig, h in old_handlers.items():
            signal.signal(sig, h)
        stop.set()
        os.write(write_fd, b"\0")
        watcher.join()
        os.close(read_fd)
        os.close(write_fd)


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
                                ("--weighted", a.weighted), ("--id-column", a.id_column),
                                ("--label-column", a.label_column), ("--name", a.name)) if v]
        if extra:
            raise UserError(f"{', '.join(extra)} only apply to --graph FILE")
        return a.dataset

    columns = {k: v for k, v in (("id_column", a.id_column), ("label_column", a.label_column)) if v is not None}
    return load_file(a.graph, labels=a.labels, features=a.features, directed=a.directed, weighted=a.weighted,
                     name=a.name, **columns)


def _main(a, argv) -> int:
    if a.cmd == "run":
        opts = distributed_options(a)
        if opts is not None:
            _init_distributed(opts)
    if a.cmd in ("run", "reproduce", "anchors", "predict", "explain"):
        _enable_xla_cache()
    if a.cmd == "run":
        methods = check_methods(split_names(a.methods))  # before any file is read (a large --graph takes a while)
        priors, time_limit = check_priors(a.priors), check_time_limit(a.time_limit)
        _warn_unused_cost_options(a, methods)
        if isinstance(a.time_limit, _DefaultLimit) and not set(methods) & set(PRIOR_METHODS):
            time_limit = None  # the default reaches clp only: other methods' records keep their configuration
        if a.plan:
            return _print_plan(a, priors, time_limit)
        check_out_folder(a.out, "--out")
        title = f"jaxclp run ({a.dataset or a.name or graph_name(a.graph)}, {a.split})"
        with summary_target(a.out, title=title), _interruptible(is_writer()):  # loading a large graph too
            return _run(a, argv, methods, priors, time_limit)
    elif a.cmd == "predict":
        if a.plan:
            return _print_plan(a, check_priors(a.priors), check_time_limit(a.time_limit))
        with _interruptible(keeps=False):
            return _predict(a, argv)
    elif a.cmd == "explain":
        return _explain(a)
    elif a.cmd == "reproduce":
        return _reproduce(a, argv)
    elif a.cmd == "summarize":
        return _summarize(a)
    elif a.cmd == "datasets":
        print(datasets_table(a.data_root))
    elif a.cmd == "anchors":

        anchors_main(a.rest, prog="jaxclp anchors")
    return 0


def _print_plan(a, priors, time_limit) -> int:
    """``--plan``: clp's :class:`jaxclp.search.SearchPlan` on the graph (loaded, nothing fitted), printed."""
    dataset = _graph_source(a)
    if isinstance(dataset, str):
        dataset = load(dataset, root=a.data_root)
    feats, _ = node_features(dataset)
    plan = clp_plan(priors, time_limit, dataset.graph, int(np.shape(feats)[1]), a.epochs)
    print(f"{dataset.name}: {dataset.num_nodes} nodes, {int(dataset.graph.num_edges)} edges, "
          f"{int(np.shape(feats)[1])} features\n{plan}")
    return 0


def _run(a, argv, methods, priors, time_limit) -> int:
    """``jaxclp run`` after its options are checked (inside the interrupt handler)."""
    dataset = _graph_source(a)
    metric = a.metric
    if not isinstance(dataset, str):
        dataset, metric = _user_graph_metric(dataset, a.metric), None
    if isinstance(dataset, str):

        name = canonical_name(dataset)  # the records' name (``Film`` -> ``actor``)
    else:
        name = dataset.name
    if not isinstance(dataset, str) and is_writer():
        print(f"jaxclp: {dataset.describe()}", file=sys.stderr, flush=True)
    title = f"jaxclp run ({name}, {a.split})"
    with summary_target(a.out, title=title), job(1, a.runs * len(methods)):
        run(dataset, a.split, methods, a.runs, a.out, seed=a.seed, epochs=a.epochs,
            progress=not a.no_progress and is_writer(), argv=["jaxclp", *argv], data_root=a.data_root,
            replace_stale=a.replace_stale, metric=metric, priors=priors, time_limit=time_limit,
            shape_buckets=not a.exact_shapes)
    if is_writer():
        print(ranking_text(a.out, name, a.split, methods))
        print(write_summary(a.out, title=title))
        png = plot_summary(a.out, title=title)
        if png is not None:
            print(png)
    else:
        print(f"jaxclp: process {jax.process_index()} of {jax.process_count()} done; process 0 writes the "
              f"records and the summary", file=sys.stderr)
    return 0


def _predict(a, argv) -> int:
    """``jaxclp predict`` (inside the interrupt handler)."""

    priors, time_limit = check_priors(a.priors), check_time_limit(a.time_limit)
    _warn_unused_cost_options(a, [a.method])
    if a.previous is not None and a.method != "clp":
        raise UserError(f"--previous reads the base predictors clp chose; it applies to --method clp, not {a.method}")
    if a.previous is not None and priors is not None:
        raise UserError("--previous and --priors both name clp's base predictors; give one of them")
    check_out_file(a.out, "--out")
    source = _graph_source(a)
    if isinstance(source, str):
        dataset = load(source, root=a.data_root).with_metric(a.metric)
    else:
        dataset = _user_graph_metric(source, a.metric)
    if a.previous is not None:
        chosen = previous_priors(a.previous, data_identity(source, dataset, a.data_root))
        priors = tuple(chosen)
        print(f"jaxclp: clp: base predictors from {a.previous}'s records (chosen there on validation): "
              + ", ".join(f"{p} ({n} of {sum(chosen.values())} splits)" for p, n in chosen.items()),
              file=sys.stderr, flush=True)
    n_lab = int((dataset.labels >= 0).sum())
    print(f"jaxclp: fitting {a.method} on {dataset.name} ({dataset.num_nodes} nodes, {n_lab} labelled, "
          f"{a.val_fraction:g} of them for validation, metric {dataset.metric})...", file=sys.stderr, flush=True)
    say = (lambda t: print(f"jaxclp: {a.method}: {t}", file=sys.stderr, flush=True)) if not a.no_progress else None
    with reporting(say):  # clp's base predictors, one line each (they take most of its time)
        pred = predict(dataset, a.method, val_fraction=a.val_fraction, seed=a.seed, epochs=a.epochs,
                       priors=priors, time_limit=time_limit, refit=not a.no_refit,
                       shape_buckets=not a.exact_shapes)
    csv_path, json_path = write_predictions(pred, a.out, argv=["jaxclp", *argv])
    n_unl = int((dataset.labels < 0).sum())
    print(f"{csv_path} ({dataset.num_nodes} nodes, {n_unl} unlabelled; {a.method} chose {pred.params} with "
          f"validation {dataset.metric} {pred.val_score:.4f} on {int(pred.val.sum())} nodes)\n"
          f"{pred.explain()}\n{json_path}")
    return 0


def _explain(a) -> int:
    """``jaxclp explain``: fit, explain the nodes, print a sentence each, write ``--json`` and ``--plot``."""

    if a.json is not None:
        check_out_file(a.json, "--json")
    if a.plot is not None:
        if Path(a.plot).suffix.lower() != ".png":
            raise UserError(f"--plot {a.plot}: name a .png file, e.g. --plot why.png")
        for q in Path(a.plot).parents:
            if q.exists() and not q.is_dir():
                raise UserError(f"--plot {a.plot}: {q} is a file, not a folder; choose another path for the plot")
        if Path(a.plot).is_dir():
            raise UserError(f"--plot {a.plot} is a folder; name the PNG file, e.g. --plot {Path(a.plot) / 'why.png'}")
    dataset = _graph_source(a)
    if isinstance(dataset, str):
        dataset = load(dataset, root=a.data_root)
    else:
        dataset = _user_graph_metric(dataset, None)
    explanations.node_index(dataset, a.node)  # an unknown node before the fit
    model = fit_model(dataset, priors=check_priors(a.priors), time_limit=check_time_limit(a.time_limit),
                      seed=a.seed, val_fraction=a.val_fraction, epochs=a.epochs, shape_buckets=not a.exact_shapes)
    lines, doc = explain_nodes(model, dataset, a.node, a.top)
    print("\n".join(lines))
    if a.json is not None:
        path = Path(a.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(path)
    if a.plot is not None:
        try:
            print(explanations.plot_explanations(model, dataset, a.node, a.plot))
        except OSError as e:
            raise UserError(f"--plot {a.plot}: cannot write it ({e.strerror or e})") from None
    return 0


def _reproduce(a, argv) -> int:
    """``jaxclp reproduce TARGET``."""
    datasets = split_names(a.datasets) if a.datasets else None
    kw = {}
    if a.splits is not None:
        if a.target not in reproduce.SPLITS or len(reproduce.SPLITS[a.target]) < 2:
            raise UserError(f"reproduce {a.target}: --splits is for the tables with several split kinds "
                            f"({', '.join(t for t, s in reproduce.SPLITS.items() if len(s) > 1)})")
        try:
            kw["splits"] = reproduce.pick_splits(a.target, split_names(a.splits))
        except ValueError as e:
            raise UserError(f"reproduce --splits: {e}") from None
    check_out_folder(a.out, "--out")
    with replacing_stale(a.replace_stale), _interruptible():
        for path in reproduce.TARGETS[a.target](Path(a.out), runs=a.runs, datasets=datasets,
                                                data_root=a.data_root, argv=["jaxclp", *argv], **kw):
            print(path)
    return 0


def _summarize(a) -> int:
    """``jaxclp summarize DIR``."""
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
