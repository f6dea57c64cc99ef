"""What defines each runner method, as data: the per-method part of a record's configuration key.

A run's ``config`` (:func:`jaxclp.experiments.identity.run_config`) holds everything shared by its methods (data,
splits, training settings, the jaxclp version). What differs per method is its candidate grid (alphas, variants,
depths, ...) and its code. :func:`method_spec` returns that as a JSON-able dict and :func:`method_hash` a short
hash of it; every result record carries both (``method_spec``, ``method_hash``), and a resumed run skips a
finished key only when its ``method_hash`` is the current one. Change a method's grid constant and its old
records become stale (refused, or moved aside with ``--replace-stale``) instead of being served as if they were
the new method's.

The grid is read from the module constants at call time, so editing a constant is caught automatically; so is a
changed default of the numeric stages every method runs through (Sinkhorn's tolerance and iterations, the solvers'
tolerance, ...: :func:`numeric_settings`, compared with :data:`HASHED_NUMERICS`). A change of a method's CODE that
neither shows (a new candidate family, another training recipe) must bump the method's entry in
:data:`REVISIONS`: that is the one manual step, and the only one.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json

from jaxclp import end_to_end
from jaxclp import priors as P
from jaxclp.baselines import ALPHA_ONE_LAYERS, AUTOSCALE_CAP
from jaxclp.experiments import methods as m
from jaxclp.experiments.candidates import select_prior_first
from jaxclp.nonlinear import nonlinear_grid
from jaxclp.search import MLP_DEPTHS

REVISIONS: dict[str, int] = {"link": 1, "clp": 3}
# link 1: early stopping on the task's metric (was accuracy). clp 1: tuned GCN / SAGE priors (the grid's "priors"
# shows them) and GNN priors on sparse features too (revision 0 left them out there). clp 2: prior-first selection
# (candidates.select_prior_first) with each prior alone as a candidate (alpha = 0), instead of the joint maximum.
# clp 3: the tuned GNN priors' grid trains as one program (jaxclp.gnn.fit_gnn_grid), which draws their dropout
# masks otherwise than revision 2's per-spec fits; with it, successive halving on >= 500 validation nodes.
"""Method name -> revision of its code; absent means 0. Bump it when a method's code changes in a way its grid
constants do not show."""


NUMERIC_STAGES = (("jaxclp.sinkhorn", "sinkhorn"), ("jaxclp.compatibility", "estimate_compatibility"),
                  ("jaxclp.clp", "clp_beliefs"), ("jaxclp.solve", "solve"), ("jaxclp.propagate", "propagate"))
"""The numeric stages whose keyword defaults decide the numbers of every method built on CLP (read by
:func:`numeric_settings`)."""

HASHED_NUMERICS = {
    "sinkhorn.sinkhorn": {"tol": 1e-06, "max_iters": 100000, "smoothing": 1e-06},
    "compatibility.estimate_compatibility": {"tol": 1e-06, "max_iters": 100000, "smoothing": 1e-06},
    "clp.clp_beliefs": {"alphas": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], "normalization": "sym",
                        "l1_normalize": False, "prior_source": "mlp", "num_iters": 50, "method": "auto",
                        "tol": 1e-06, "spectrum": True, "spectral_scale": False, "compat": "sinkhorn"},
    "solve.solve": {"normalization": "sym", "method": "auto", "tol": 1e-06, "max_iters": 10000, "throw": True},
    "propagate.propagate": {"num_iters": 50, "normalization": "sym", "l1_normalize": False, "engine": "factored",
                            "throw": True, "return_info": False},
}
"""The :func:`numeric_settings` the committed records were made with. Method hashes include only the settings
that differ from it (so those records keep their hashes); any change of one of these defaults therefore changes
every hash, and a forgotten :data:`REVISIONS` bump cannot serve stale records. Where a default changes on purpose,
the records it touches are re-run."""


RESULT_NEUTRAL = {"solve.solve": ("x0",)}
"""Keywords of :data:`NUMERIC_STAGES` that do not change a result, left out of :func:`numeric_settings`: a warm
start (``x0``) changes only the iterations to the same tolerance."""


def numeric_settings() -> dict:
    """``{"module.function": {keyword: default}}`` of :data:`NUMERIC_STAGES`, read from their signatures now
    (without :data:`RESULT_NEUTRAL`)."""
    out = {}
    for module, name in NUMERIC_STAGES:  # by module name: the functions jaxclp.solve etc. shadow their modules
        params = inspect.signature(getattr(importlib.import_module(module), name)).parameters
        key = f"{module.removeprefix('jaxclp.')}.{name}"
        neutral = RESULT_NEUTRAL.get(key, ())
        out[key] = json.loads(json.dumps({k: p.default for k, p in params.items()
                                          if p.default is not inspect.Parameter.empty and k not in neutral},
                                         default=_jsonable))
    return out


def changed_numerics() -> dict:
    """The entries of :func:`numeric_settings` that differ from :data:`HASHED_NUMERICS` (empty: none)."""
    return {k: v for k, v in numeric_settings().items() if HASHED_NUMERICS.get(k) != v}


def _nonlinear_defaults(**overrides) -> dict:
    params = inspect.signature(nonlinear_grid).parameters
    out = {k: p.default for k, p in params.items() if p.kind is p.KEYWORD_ONLY and p.default is not None}
    out.update(overrides)
    return out


def _grids() -> dict[str, dict]:
    # "authors": the nonlinear step's grid (jaxclp.nonlinear) under its old name, a key of the committed records'
    # method_spec: renaming it would change their method_hash
    clp = {"alphas": m.ALPHAS, "variants": m.CLP_VARIANTS, "spectral_variants": m.CLP_SPECTRAL_VARIANTS,
           "spectral_alphas": m.SPECTRAL_ALPHAS, "authors": _nonlinear_defaults(echo=(False,))}
    tuned = {"depths": m.GNN_DEPTHS, "plain_depths": m.GNN_PLAIN_DEPTHS, "hidden": m.GNN_HIDDEN,
             "dropout": m.GNN_DROPOUT, "lr": m.GNN_LR, "ffn": m.GNN_FFN}
    grids = {
        "mlp": {},
        "link": {},
        "lp": {"alphas": m.ALPHAS},
        "cs": {"alphas": m.CS_ALPHAS, "fixed_alphas": m.CS_FIXED_ALPHAS, "scales": m.CS_SCALES,
               "alpha_one_layers": ALPHA_ONE_LAYERS, "autoscale_cap": AUTOSCALE_CAP},
        "clp_star": {"alphas": m.ALPHAS},
        "clp_mlp": clp,
        "clp_paper": {"alphas": m.ALPHAS, "variants": (("sym", False, "mlp"),)},
        "clp_refined": {"alphas": m.ALPHAS},
        "clp_authors": _nonlinear_defaults(),
        "gcn": {},
        "gcn_tuned": tuned,
        "h2gcn": {},
        "sage": tuned,
        "gat": tuned,
        "gat_sep": tuned,
        "gcn_sep": tuned,
        "clp": {"priors": m.CLP_PRIOR_CANDIDATES, "selection": select_prior_first.__name__,
                # successive halving (jaxclp.priors.TUNED_RUNGS) only where there is any: without it, the
                # hash of revision 2's records
                "tuned_priors": (dict(tuned, rungs=P.TUNED_RUNGS, rungs_min_val=P.TUNED_RUNGS_MIN_VAL)
                                 if P.TUNED_RUNGS else tuned),
                **clp},
        "linkx": {},
        "clp_e2e": {"alphas": end_to_end.DEFAULT_ALPHAS, "train": end_to_end.DEFAULT_CONFIG._asdict(),
                    "fed_fraction": end_to_end.DEFAULT_FED_FRACTION},
    }
    for name in m.NEEDS_PRIOR:  # the MLP prior's depth is chosen on validation among these
        grids.setdefault(name, {})["mlp_depths"] = MLP_DEPTHS
    changed = changed_numerics()
    if changed:  # the stages every method runs through, directly or through its baselines
        for grid in grids.values():
            grid["numerics"] = changed
    return grids


def method_spec(method: str) -> dict:
    """The definition of runner method ``method`` as a JSON-able dict.

    Returns:
        ``{"method": name, "function": qualified name, "revision": int, "grid": {...}}``; a method without an
        entry in the grid table (e.g. one a user registers) has an empty grid.

    Raises:
        ValueError: unknown method.
    """
    if method not in m.METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(m.METHODS)}")
    fn = m.METHODS[method]
    spec = {"method": method, "function": f"{fn.__module__}.{fn.__qualname__}",
            "revision": int(REVISIONS.get(method, 0)), "grid": _grids().get(method, {})}
    return json.loads(json.dumps(spec, sort_keys=True, default=_jsonable))


def _jsonable(x):
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "_asdict"):
        return dict(x._asdict())
    return repr(x)


def method_hash(method: str) -> str:
    """12 hex digits of the sha256 of :func:`method_spec` (canonical JSON)."""
    blob = json.dumps(method_spec(method), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
