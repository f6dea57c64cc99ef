"""``jaxclp.CLP``: a fit/predict estimator for library users."""

from __future__ import annotations

import itertools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks, buckets
from jaxclp.nonlinear import nonlinear_grid
from jaxclp.clp import DEFAULT_ALPHAS, CLPResult, clp_beliefs
from jaxclp.compatibility import initial_beliefs
from jaxclp.datasets.splits import holdout_split
from jaxclp.explain import explain
from jaxclp.fit_threads import fit_threads
from jaxclp.features import as_features
from jaxclp.graph import Graph
from jaxclp.metrics import check_metric
from jaxclp.selection import first_best, prior_first, validation_scores
from jaxclp.operator import spectral_radius
from jaxclp.mlp import MLPResult
from jaxclp.priors import DEADLINE_PRIORS, PRIORS, fit_prior
from jaxclp.search import Search, SearchPlan, check_time_limit
from jaxclp.train import TrainConfig
from jaxclp.update import UpdateResult, update_beliefs


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _is_array_prior(source) -> bool:
    return not isinstance(source, str) and not hasattr(source, "predict_proba") and not callable(source)


def _prior_graph(graph, source):
    """The graph handed to :func:`jaxclp.priors.fit_prior`: ``graph`` itself where it holds its edge list on one
    device (the protocol's ``has_edge_list``), else (a :class:`jaxclp.ShardedGraph`) an edgeless :class:`Graph` of
    its n nodes: the priors such a fit takes (the MLP on the features, an (n, K) array, a fitted ``predict_proba``
    object) read only n from the graph. The graph-based priors (LINK, LINKX, the GNNs) and callables (which
    receive the graph) raise ValueError."""
    if graph.has_edge_list:
        return graph
    if isinstance(source, str) and source != "mlp":
        raise ValueError(f"prior={source!r} needs the unsharded graph and is not supported for a ShardedGraph; "
                         "use prior='mlp', an (n, K) array or a fitted object with predict_proba (or fit the "
                         "prior on the unsharded graph and pass its (n, K) output)")
    if callable(source) and not hasattr(source, "predict_proba"):
        raise ValueError("prior: a callable prior receives the graph and is not supported for a ShardedGraph; "
                         "pass its (n, K) output as prior instead")
    n = graph.num_nodes
    empty = jnp.zeros((0,), jnp.int32)
    return Graph(senders=empty, receivers=empty, weights=jnp.zeros((0,), graph.weights.dtype), num_nodes=n)


NONLINEAR_OPTIONS = ("alphas", "starts", "posts", "echo", "weights", "num_layers")
"""The :func:`jaxclp.nonlinear.nonlinear_grid` options ``CLP(nonlinear={...})`` passes on."""


def _is_prior_list(prior) -> bool:
    """Whether ``prior`` is a list/tuple of priors to choose from (each a name, a ``predict_proba`` object, a
    callable or a 2-D array) rather than one (n, K) array-like given as nested lists."""
    if not isinstance(prior, (list, tuple)) or not prior:
        return False
    return all(isinstance(p, str) or hasattr(p, "predict_proba") or callable(p) or getattr(p, "ndim", None) == 2
               for p in prior)


def _check_priors(prior) -> list | None:
    """The list of priors to choose from (each checked by :func:`_check_prior_source`), or None for one prior."""
    if not _is_prior_list(prior):
        _check_prior_source(prior)
        return None
    return [_check_prior_source(p) for p in prior]


def _check_prior_source(prior):
    """``prior`` as CLP takes it (a :data:`PRIORS` name, an array-like, a ``predict_proba`` object), or
    ValueError naming ``prior``. Arrays are checked against (n, K) in :meth:`CLP.fit`."""
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {sorted(PRIORS)}, an (n, K) array or a fitted object with "
                             f"predict_proba; got {prior!r}")
        return prior
    if prior is None or isinstance(prior, (bool, int, float, dict)):
        raise ValueError(f"prior must be one of {sorted(PRIORS)}, an (n, K) array or a fitted object with "
                         f"predict_proba; got {prior!r}")
    return prior


class NotFittedError(ValueError, AttributeError):
    """A fitted attribute or method of an estimator used before ``fit`` (scikit-learn's convention: a
    ValueError and an AttributeError, so ``hasattr`` and ``except ValueError`` both work)."""


class CLP:
    """Compatible Label Propagation on a prior (by default the paper's MLP); every choice is made on validation.

    Example::

        model = jaxclp.CLP(hidden=(64,)).fit(graph, features, labels, train_mask, val_mask)
        pred = model.predict()            # (n,) labels, in the user's own label values
        model.classes_                    # sorted labels of the train/val nodes; columns of predict_proba
        model.alpha_, model.H_, model.spectral_.rho

    The prior (the base predictor whose (n, K) class distributions CLP propagates, :mod:`jaxclp.priors`) is
    pluggable: a name from :data:`jaxclp.priors.PRIORS`, an (n, K) array, or any fitted object with
    ``predict_proba`` (called on the node features). Runnable::

        import numpy as np, jaxclp
        syn = jaxclp.datasets.synthetic(h=0.2, avg_degree=6, num_classes=3, nodes_per_class=40, seed=0)
        y = np.asarray(syn.labels)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(len(y), 4)) + np.eye(3, 4)[y]
        train = rng.random(len(y)) < 0.3
        val = ~train & (rng.random(len(y)) < 0.4)
        fast = dict(epochs=50, patience=20, alphas=(0.5, 0.9))
        m_linkx = jaxclp.CLP(prior="linkx", **fast).fit(syn.graph, x, y, train, val)
        m_linkx.prior_fit_.best_epoch, m_linkx.prior_fit_.val_score, m_linkx.val_score_

        class Centroids:  # any fitted object with predict_proba(features) -> (n, K), e.g. a scikit-learn model
            def __init__(self, x, y):
                self.classes_ = np.unique(y)
                self.c = np.stack([x[y == k].mean(0) for k in self.classes_])
            def predict_proba(self, x):
                s = -((x[:, None, :] - self.c) ** 2).sum(-1)
                e = np.exp(s - s.max(1, keepdims=True))
                return e / e.sum(1, keepdims=True)

        m_obj = jaxclp.CLP(prior=Centroids(x[train], y[train]), **fast).fit(syn.graph, x, y, train, val)
        uniform = np.full((len(y), 3), 1 / 3)                                # an (n, K) array
        m_arr = jaxclp.CLP(prior=uniform, **fast).fit(syn.graph, None, y, train, val)
        m_obj.predict()[:5], m_arr.prior_name_                              # ..., 'array'

    Args:
        hidden: hidden widths of the MLP (``()`` is linear).
        dropout, lr, weight_decay, epochs, patience, optimizer: training of the prior (paper defaults; hidden
            and dropout apply to the MLP prior only).
        prior: the base predictor: ``"mlp"`` (default: the paper's MLP, trained with ``hidden`` / ``dropout``),
            another name from :data:`jaxclp.priors.PRIORS` (``"link"``, ``"linkx"``, ``"gcn"``, ``"h2gcn"``,
            ``"sage"``, ``"gat"``; trained with the settings above, early stopping on validation ``metric``),
            an (n, K) array (floating, nonnegative, rows summing to 1, columns in the order of ``classes_``; not
            rescaled) or a fitted object with ``predict_proba(features)`` (columns aligned to ``classes_`` by its
            ``classes_`` when it has one). Anything else raises ValueError naming ``prior``.
            A list or tuple of them (e.g. ``("mlp", "link", "gcn_tuned")``) chooses on validation with the rule
            of the runner's ``clp`` (revision 2, chosen by cross-fitting on validation nodes, ``jaxclp reproduce
            selection``): every prior is fitted (same key), the one with the best validation score alone is kept
            (the first on ties), CLP's grid runs on it, and its best configuration is kept only if it scores
            higher on validation than that prior alone; otherwise the prediction is the prior (``alpha_ = 0.0``,
            ``propagated_ = False``). On a large validation set (:data:`jaxclp.selection.LARGE_VALIDATION`
            nodes, accuracy) CLP's grid also runs on the other priors, and one of them replaces the choice where
            its best configuration is better by a clear margin. A single prior is always propagated. The choice
            is :func:`jaxclp.selection.prior_first`, the function the runner's ``clp`` calls.
        time_limit: seconds the fit of a list of priors may spend on them (None: no limit): they are fitted in
            the given order while the expected cost of the next (:data:`jaxclp.search.PRIOR_COST` times the
            seconds per unit measured so far) fits the time left; the first is always fitted; the others are
            named in ``skipped_priors_``. List them cheap first, e.g. ``("mlp", "link", "gcn", "gcn_tuned")``.
            A named predictor started (LINK aside: :data:`jaxclp.priors.DEADLINE_PRIORS`) stops training where
            the limit runs out (in chunks, :func:`jaxclp.train.fit_to_deadline`; ``skipped_priors_`` then says
            after which epoch); CLP's grid on the chosen prior is computed whole (``jaxclp predict
            --time-limit`` also leaves out CLP's costlier variants).
        prior_options: keyword options of a named prior (e.g. ``{"hidden": 128}`` for "linkx"), passed to
            :func:`jaxclp.priors.fit_prior`; for "mlp" they override ``hidden`` / ``dropout``.
        shape_buckets: fit the named priors of :data:`jaxclp.buckets.BUCKETED_PRIORS` on inputs padded to shape
            buckets (:func:`jaxclp.priors.fit_prior`'s ``shape_buckets``) and compute CLP's candidates on the
            graph padded to its bucket (:func:`jaxclp.buckets.propagation_graph`; a :class:`Graph`, not a
            ShardedGraph): fits on graphs of similar size then share their compiled programs (one process, or
            many through the compilation cache); the same computation as unpadded up to rounding.
        alphas: grid of alphas; the closed form is solved for all of them at once.
        normalization: "sym", "row", "none", or a list of them to select from on validation.
        l1_normalize: bool, or a list (e.g. ``[False, True]``) to select from.
        prior_source: "mlp", "b0", or a list to select from.
        nonlinear: also try the nonlinear propagation step (:mod:`jaxclp.nonlinear`, the step of the authors'
            code: the propagated term L1-normalized per node before mixing, start x alpha up to 1 x clamp/softmax
            x adjacency weight, each at its best validation layer of 20; the echo term off unless asked), as the
            runner's ``clp`` does; True, or a dict of :func:`jaxclp.nonlinear.nonlinear_grid` options (``alphas``,
            ``starts``, ``posts``, ``echo``, ``weights``, ``num_layers``); None (the default) or False: off.
            Taken only where it scores strictly higher on validation than the paper's update.
        spectral_scale: propagate with each class operator divided by its spectral radius, ``A^F_k / rho(A^F_k)``
            (:func:`jaxclp.clp_beliefs`): alpha then means the same on every graph and every alpha < 1 converges
            (extend ``alphas`` toward 1, e.g. 0.95, 0.99); linear update only (a grid skips it with
            ``l1_normalize=True``). The paper's operators have rho 0.08-0.34 on our
            graphs, so unscaled CLP barely moves its prior; bool or a list (``[False, True]``) to select from.
        num_iters: steps of the iterative (L1) variant.
        method: closed-form solver ("auto" by default).
        metric: "accuracy" or "roc_auc" for validation selection (of the MLP's epoch and of CLP's
            configuration).
        seed: PRNG seed for the MLP (or pass ``key`` to :meth:`fit`).
        classes: the label values (any integers >= 0), e.g. ``[3, 7, 99]``; by default (scikit-learn's
            convention) the sorted unique labels of the train and validation nodes.
        num_classes: shorthand for ``classes=range(num_classes)`` (labels are then 0..K-1, and a class may
            have no labelled node at all).

    Labels: integers, ``-1`` marks unlabelled nodes; only ``train_mask | val_mask`` entries are read (they
    must not be -1) and any value below -1 is refused. Label values are mapped internally to 0..K-1 in the
    order of ``classes_``; :meth:`predict` maps back. When the classes are inferred (neither ``classes`` nor
    ``num_classes`` given), a label that occurs on validation nodes but on no training node is refused with a
    ValueError (a stray label would otherwise become a class the MLP and H never saw); pass ``classes`` or
    ``num_classes`` to declare such a class on purpose.

    Attributes (after fit):
        classes_: (K,) sorted label values (the user's); ``num_classes_`` = K.
        alpha_, normalization_, l1_normalize_, prior_source_, spectral_scale_: the selected configuration.
        H_: (K, K) compatibility; spectral_: per-class :class:`jaxclp.SpectralInfo`; sinkhorn_: its info.
        prior_: (n, K) the prior D that was propagated.
        prior_fit_: :class:`jaxclp.priors.PriorResult` (its name, validation score, best epoch, params) of the
            prior that was propagated (the chosen one, for a list of priors).
        prior_val_scores_: list of (name, validation score, computed like CLP's) of every prior fitted, in the
            given order; ``prior_index_`` the chosen one's position.
        skipped_priors_: names of the priors of a list left out because ``time_limit`` ran out (cheap ones are
            fitted first: list them cheap first; :class:`jaxclp.search.Search`), ``"NAME epochs after E"``
            where the limit stopped a predictor's training at epoch E, and ``"clp on NAME"`` where the
            large-validation step left CLP's grid on a fitted prior out because it would end past the limit.
        propagated_: False where, for a list of priors, validation kept the chosen prior alone (``alpha_ = 0.0``;
            ``normalization_``, ``H_``, ... then describe the best CLP configuration that did not beat it).
        mlp_: :class:`jaxclp.mlp.MLPResult` (prior_, params, training info) for the MLP prior, else None.
        val_scores_: dict mapping (normalization, l1, prior_source, spectral_scale, alpha) -> validation score;
            with ``nonlinear``, also ("nonlinear", start, alpha, post, echo, weight) -> score.
        nonlinear_: None, or where the nonlinear step was chosen, its ``start``, ``post``, ``echo``, ``weight``
            and ``layer`` (``alpha_`` its alpha, ``normalization_`` "nonlinear-<weight>", ``method_``
            "nonlinear").
        beliefs_: (n, K) propagated beliefs of the selected configuration.
        train_mask_, val_mask_: (n,) bool masks the fit used (given, or made by :func:`jaxclp.datasets.holdout_split`).
    """

    def __init__(self, *, hidden: Sequence[int] = (64,), dropout: float = 0.5, lr: float = 0.01,
                 weight_decay: float = 5e-5, epochs: int = 500, patience: int = 50, optimizer: str = "adam",
                 alphas=DEFAULT_ALPHAS, normalization="sym", l1_normalize=False, prior_source="mlp",
                 num_iters: int = 50, method: str = "auto", metric: str = "accuracy", seed: int = 0,
                 classes=None, num_classes: int | None = None, prior="mlp", prior_options: dict | None = None,
                 spectral_scale=False, nonlinear=None, time_limit: float | None = None,
                 shape_buckets: bool = False):
        check_metric(metric)
        self.time_limit = check_time_limit(time_limit)
        if not isinstance(shape_buckets, (bool, np.bool_)):
            raise ValueError(f"shape_buckets must be True or False; got {shape_buckets!r}")
        self.shape_buckets = bool(shape_buckets)
        several = _check_priors(prior)
        if prior_options is not None and not isinstance(prior_options, dict):
            raise ValueError(f"prior_options must be a dict or None; got {type(prior_options).__name__}")
        if prior_options and not isinstance(prior, str):
            raise ValueError("prior_options apply to a single named prior only" if several is not None else
                             "prior_options apply to a named prior only")
        self.prior = prior
        self.prior_options = dict(prior_options or {})
        self.hidden = tuple(hidden)
        self.dropout = dropout
        self.cfg = TrainConfig(lr=lr, weight_decay=weight_decay, epochs=epochs, patience=patience,
                               optimizer=optimizer, metric=metric)  # the MLP is selected on it too
        self.alphas = tuple(float(a) for a in alphas)
        _checks.alpha(np.asarray(self.alphas), "alphas")
        self.normalization = normalization
        self.l1_normalize = l1_normalize
        self.prior_source = prior_source
        for v in _as_list(spectral_scale):
            if not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"spectral_scale must be a bool or a list of bools; got {spectral_scale!r}")
        self.spectral_scale = spectral_scale
        nonlinear = False if nonlinear is None else nonlinear
        if not isinstance(nonlinear, (bool, dict)):
            raise ValueError(f"nonlinear must be a bool or a dict of jaxclp.nonlinear.nonlinear_grid options; "
                             f"got {nonlinear!r}")
        unknown = sorted(set(nonlinear) - set(NONLINEAR_OPTIONS)) if isinstance(nonlinear, dict) else []
        if unknown:
            raise ValueError(f"nonlinear: unknown jaxclp.nonlinear.nonlinear_grid option(s) {unknown}; choose from "
                             f"{list(NONLINEAR_OPTIONS)}")
        self.nonlinear = nonlinear
        self.num_iters = num_iters
        self.method = method
        self.metric = metric
        self.seed = seed
        self.classes = classes
        self.num_classes = num_classes
        if classes is not None and num_classes is not None:
            raise ValueError("pass classes or num_classes, not both")
        if num_classes is not None:
            _checks.num_classes(num_classes)

    def plan(self, graph=None, features=None, prior=None) -> SearchPlan:
        """What :meth:`fit` will try, in order, with its expected cost (:class:`jaxclp.search.SearchPlan`), before
        anything runs: the priors (cheap first under ``time_limit``), then CLP's candidates on the chosen one.

        Args:
            graph: optional; with it the plan carries expected seconds (a rough model of the graph's size,
                :func:`jaxclp.search.estimate_unit_seconds`) and says what ``time_limit`` would leave out.
            features: optional (n, d) features (their width enters the estimate).
            prior: overrides the constructor's ``prior`` as in :meth:`fit`.

        Returns:
            A :class:`jaxclp.search.SearchPlan`; ``print(plan)`` shows it.
        """
        source = self.prior if prior is None else prior
        several = _check_priors(source)
        names = tuple(p if isinstance(p, str) else f"given prior {i}"
                      for i, p in enumerate([source] if several is None else several))
        kinds = ("closed",) + (("authors",) if self.nonlinear not in (None, False) else ())
        combos = itertools.product(_as_list(self.normalization), _as_list(self.l1_normalize),
                                   _as_list(self.prior_source), _as_list(self.spectral_scale))
        fields = dict(priors=names, mlp_depths=(), grid_kinds=kinds, time_limit=self.time_limit,
                      closed_variants=tuple(f"{n}{'/l1' if l1 else ''}/{s}{'/rho' if sc else ''}"
                                            for n, l1, s, sc in combos))
        if graph is None:
            return SearchPlan(**fields)
        width = 1 if features is None else int(np.shape(features)[1])
        return SearchPlan.for_graph(graph, width, self.cfg.epochs, **fields)

    def fit(self, graph: Graph, features, labels, train_mask=None, val_mask=None, *, key=None, prior=None,
            val_fraction: float = 0.2) -> "CLP":
        """Fits the prior, estimates H and selects alpha and the variant on validation.

        Args:
            graph: the graph (n nodes), or a :class:`jaxclp.ShardedGraph` (:func:`jaxclp.shard_graph`): then H, the
                selection and the beliefs run on the node-sharded graph (:func:`jaxclp.sharded_clp.clp_beliefs`;
                ``method`` "auto", "neumann", "jacobi", "bicgstab" or "cg") and every result is in the user's node
                order. The prior must not need the graph: "mlp", an (n, K) array or a fitted ``predict_proba``
                object (other names and callables raise ValueError naming ``prior``).
            features: (n, d) node features (dense array, scipy.sparse matrix, e.g. the loader's
                ``sparse_features=True`` CSR, or :class:`jaxclp.features.SparseFeatures`; sparse input is never
                densified), or None when the prior needs none (an array, or ``"link"``).
            labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
            train_mask, val_mask: (n,) bool, disjoint; train nonempty, val nonempty. Both None (default): every
                labelled node is used, ``val_fraction`` of them held out for the choices
                (:func:`jaxclp.datasets.holdout_split` with ``seed``: stratified by class, every class keeps a
                training node, and validation holds two classes wherever another class can spare a node); the
                masks are kept as ``train_mask_``, ``val_mask_``.
            key: PRNG key (default ``jax.random.key(seed)``).
            prior: overrides the constructor's ``prior`` for this fit (any form it accepts), e.g. an (n, K)
                precomputed prior: floating, nonnegative, rows summing to 1 (refused otherwise, not rescaled),
                columns in the order of ``classes_``.
            val_fraction: the hold-out share when no masks are given.

        Returns:
            self.

        Raises:
            ValueError: naming the argument that is wrong (shapes against ``graph.num_nodes``, dtypes, labels).
        """
        self._fitted = False  # set at the end: a fit that raised leaves the estimator unfitted
        n = graph.num_nodes
        if (train_mask is None) != (val_mask is None):
            raise ValueError("pass both train_mask and val_mask, or neither (then every labelled node is used, "
                             "val_fraction of them for validation)")
        if train_mask is None:
            y_all = _checks.integer_labels("labels", labels)
            _checks.shape("labels", y_all, (n,))
            train_mask, val_mask = holdout_split(y_all, val_fraction, self.seed)
        _checks.mask("train_mask", train_mask, n)
        _checks.mask("val_mask", val_mask, n)
        tm, vm = np.asarray(train_mask), np.asarray(val_mask)
        if np.any(tm & vm):
            raise ValueError("train_mask and val_mask overlap")
        self.train_mask_, self.val_mask_ = tm, vm
        y_user = _checks.integer_labels("labels", labels)
        _checks.shape("labels", y_user, (n,))
        source = self.prior if prior is None else prior
        several = _check_priors(source)
        sources = [source] if several is None else several
        if several is not None and self.prior_options:
            raise ValueError("prior_options apply to a single named prior only; got a list of priors")
        raw_features = features
        for src in sources:
            if isinstance(src, str) and features is None and src != "link":
                raise ValueError("features is None: pass features or a precomputed prior")
        if features is not None and not all(_is_array_prior(src) for src in sources):
            features = as_features(features, jnp.float32)
            _checks.features(features, n)  # one row per node of graph: blame features, not the masks
        self.classes_ = self._resolve_classes(y_user, tm, vm)
        k = self.num_classes_ = len(self.classes_)
        seen = tm | vm
        y = np.where(seen, np.searchsorted(self.classes_, np.where(seen, y_user, self.classes_[0])), 0)
        y = jnp.asarray(y, jnp.int32)
        key = jax.random.key(self.seed) if key is None else key
        search = Search(self.time_limit)  # the same budget as the runner's clp (jaxclp.search)
        fitted_by = {}

        def fit(i, deadline, epochs):  # every prior from the same key, cheap first under time_limit
            src = sources[i]
            prior_graph = _prior_graph(graph, src)
            if isinstance(src, str):
                options = (dict(hidden=self.hidden, dropout=self.dropout) if src == "mlp" else {}) | self.prior_options
                if deadline is not None:
                    options["deadline"] = deadline
                res = fit_prior(src, key, prior_graph, features, y, jnp.asarray(tm), jnp.asarray(vm), k, self.cfg,
                                shape_buckets=self.shape_buckets, **options)
            else:  # an array or a predict_proba object: validated by fit_prior (ValueError naming prior)
                res = fit_prior(src, key, prior_graph, raw_features, y, jnp.asarray(tm), jnp.asarray(vm), k,
                                self.cfg, classes=self.classes_)
            fitted_by[i] = res
            return jax.block_until_ready(res.prior), res.stopped_at

        search.fit_priors(sources, fit, clocked=DEADLINE_PRIORS, threads=fit_threads(n))
        fits = [fitted_by[i] for i in sorted(fitted_by)]
        self.skipped_priors_ = search.skipped
        # scored exactly as CLP's configurations are below (same function and dtype), so "CLP beats its prior"
        # compares like with like (PriorResult.val_score may be float64 where CLP's scores are float32)
        prior_scores = validation_scores(self.metric, [jnp.asarray(f.prior) for f in fits], y, vm)
        self.prior_val_scores_ = [(f.name, float(s)) for f, s in zip(fits, prior_scores)]
        grids = {}

        def candidate_scores(i):  # CLP's candidates on a prior the rule reads (jaxclp.selection.prior_first)
            grids[i] = self._candidates(graph, jnp.asarray(fits[i].prior), y, tm, vm)
            return [c[0] for c in grids[i]]

        choice = prior_first(prior_scores, candidate_scores, keep_prior=several is not None, num_val=int(vm.sum()),
                             metric=self.metric, deadline=search.deadline,
                             decide=lambda p, fits_in_time: search.other_grid(fits[p].name, fits_in_time))
        self.prior_index_ = choice.prior
        fitted = fits[self.prior_index_]
        self.prior_fit_ = fitted
        self.prior_name_ = fitted.name
        self.mlp_ = MLPResult(fitted.prior, fitted.params, fitted.info) if fitted.name == "mlp" else None
        self.prior_ = jnp.asarray(fitted.prior)
        candidates = grids[choice.prior]
        best_clp = first_best([c[0] for c in candidates])[0]
        if best_clp is None:
            raise ValueError("no alpha in the grid gives a convergent propagation (alpha * rho >= 1 for all)")
        # the best CLP configuration (described even where the prior is kept); H and the Sinkhorn diagnostics are
        # the best closed form's where the nonlinear step wins
        plain = [c for c in candidates if c[1][0] == "clp"]
        self._take(plain[first_best([c[0] for c in plain])[0] or 0])
        if candidates[best_clp][1][0] == "nonlinear":
            self._take(candidates[best_clp])
        self._graph, self._train, self._labels = graph, jnp.asarray(tm), y
        self.propagated_ = choice.propagated
        if not choice.propagated:
            # the chosen prior alone (CLP at alpha = 0 is its prior): no CLP configuration beats it on validation
            self.alpha_, self.val_score_ = 0.0, float(choice.score)
            self.beliefs_ = self.prior_
        self._fitted = True
        return self

    def _candidates(self, graph, prior, y, tm, vm) -> list:
        """CLP's candidates on ``prior`` in the grid's order (variants x alphas, then the nonlinear step's
        configurations): ``[(validation score, spec), ...]``, ``spec`` what :meth:`_take` needs to store the
        candidate's fitted attributes. Fills ``val_scores_``."""
        self.val_scores_ = {}
        out = []
        n = graph.num_nodes
        padded = self.shape_buckets and graph.has_edge_list  # a ShardedGraph has no bucket padding
        if padded:
            # the propagation stages on the graph padded to its bucket (its padding nodes marked, Graph.real): the
            # same operators and solves on the real nodes to rounding, one compiled program per bucket; padding
            # rows hold uniform priors, no label and no mask, and every candidate keeps the first n rows
            graph = buckets.propagation_graph(graph)
            nb = graph.num_nodes
            prior, y = buckets.pad_prior(prior, nb), buckets.pad_nodes(y, nb, 0)
            tm, vm = buckets.pad_nodes(tm, nb, False), buckets.pad_nodes(vm, nb, False)
        combos = list(itertools.product(_as_list(self.normalization), _as_list(self.l1_normalize),
                                        _as_list(self.prior_source), _as_list(self.spectral_scale)))
        # spectral scaling applies to the linear update only: skip it with the per-step L1 variant in a grid
        # (asked for alone, clp_beliefs refuses it with a ValueError)
        combos = [c for c in combos if not (c[1] and c[3])] or combos
        for norm, l1, src, scale in combos:
            res: CLPResult = clp_beliefs(graph, prior, y, jnp.asarray(tm), alphas=self.alphas,
                                         normalization=norm, l1_normalize=l1, prior_source=src,
                                         num_iters=self.num_iters, method=self.method, spectrum=False,
                                         spectral_scale=bool(scale))
            scores = np.where(res.valid, validation_scores(self.metric, res.beliefs, y, vm), -np.inf)
            if padded:  # spectral_ (the padded graph's bounds) is recomputed on the graph itself when read
                res = res._replace(beliefs=buckets.unpad_nodes(res.beliefs, n, axis=1), spectral=None)
            for i, (a, s) in enumerate(zip(self.alphas, scores)):
                self.val_scores_[(norm, l1, src, bool(scale), a)] = float(s)
                out.append((float(s), ("clp", norm, l1, src, bool(scale), i, res)))
        if self.nonlinear is not False:  # True or a dict of options (an empty dict: the defaults)
            if not graph.has_edge_list:
                raise ValueError("nonlinear=True needs the unsharded graph (jaxclp.nonlinear.nonlinear_grid); it is "
                                 "not supported for a ShardedGraph")
            options = {"echo": (False,)} | (self.nonlinear if isinstance(self.nonlinear, dict) else {})
            ares = nonlinear_grid(graph, prior, y, jnp.asarray(tm), jnp.asarray(vm), metric=self.metric, **options)
            scores = validation_scores(self.metric, ares.beliefs, y, vm)
            if padded:
                ares = ares._replace(beliefs=buckets.unpad_nodes(ares.beliefs, n, axis=1))
            for j, ((start, a, post, echo, w), s) in enumerate(zip(ares.configs, scores)):
                self.val_scores_[("nonlinear", start, a, post, bool(echo), w)] = float(s)
                out.append((float(s), ("nonlinear", j, ares)))
        return out

    def _take(self, candidate) -> None:
        """Stores the fitted attributes of one of :meth:`_candidates`' entries."""
        score, spec = candidate
        self.val_score_ = float(score)
        self.nonlinear_ = None
        if spec[0] == "clp":
            _, self.normalization_, self.l1_normalize_, self.prior_source_, self.spectral_scale_, i, res = spec
            self.alpha_ = self.alphas[i]
            self.H_, self.sinkhorn_, self._spectral = res.H, res.sinkhorn, res.spectral
            self.method_ = res.method
            self.beliefs_ = res.beliefs[i]
            self._spectral_normalization = self.normalization_
            return
        _, j, ares = spec
        start, a, post, echo, w = ares.configs[j]
        self.nonlinear_ = {"start": start, "post": post, "echo": bool(echo), "weight": w,
                           "layer": int(np.asarray(ares.layer)[j])}
        self.normalization_, self.l1_normalize_, self.prior_source_ = f"nonlinear-{w}", None, start
        self.spectral_scale_, self.alpha_, self.method_ = False, float(a), "nonlinear"
        self.H_, self._spectral, self._spectral_normalization = ares.H, None, w
        self.beliefs_ = ares.beliefs[j]

    def _resolve_classes(self, y: np.ndarray, tm: np.ndarray, vm: np.ndarray) -> np.ndarray:
        """Sorted class labels (K,), validating ``y`` (user values) on the train/val nodes."""
        if np.any(y < -1):
            i = int(np.flatnonzero(y < -1)[0])
            raise ValueError(f"labels must be class ids >= 0, or -1 for unlabelled nodes; got {int(y[i])} at "
                             f"node {i}")
        for mname, m in (("train_mask", tm), ("val_mask", vm)):
            if np.any(y[m] == -1):
                nodes = np.flatnonzero(m & (y == -1))
                raise ValueError(f"labels is -1 (unlabelled) on {len(nodes)} {mname} node(s), e.g. node(s) "
                                 f"{nodes[:5].tolist()}: every train/val node needs a label")
        if self.classes is not None:
            classes = _checks.integer_labels("classes", self.classes).ravel()
            if np.unique(classes).size != classes.size or np.any(classes < 0):
                raise ValueError(f"classes must be distinct integers >= 0; got {classes.tolist()}")
            classes = np.sort(classes)
        elif self.num_classes is not None:
            classes = np.arange(int(self.num_classes))
        else:
            classes = np.unique(y[tm | vm])
            val_only = np.setdiff1d(np.unique(y[vm]), np.unique(y[tm]))
            if val_only.size:
                nodes = np.flatnonzero(vm & np.isin(y, val_only))
                raise ValueError(
                    f"labels: class(es) {val_only.tolist()} occur on val_mask node(s) {nodes[:5].tolist()} but on "
                    "no train_mask node, so the MLP and H would never see them. Fix the labels, or pass "
                    "classes=[...] (or num_classes) to declare the class set if this is intended")
        if classes.size < 2:
            raise ValueError(f"need at least K = 2 classes; the train/val labels take only the value(s) "
                             f"{classes.tolist()}")
        seen = tm | vm
        unknown = seen & ~np.isin(y, classes)
        if unknown.any():
            nodes = np.flatnonzero(unknown)
            raise ValueError(f"labels on train/val nodes must be one of classes {classes.tolist()}; got "
                             f"{np.unique(y[unknown])[:5].tolist()} at node(s) {nodes[:5].tolist()}")
        return classes

    @property
    def spectral_(self):
        """Per-class :class:`jaxclp.SpectralInfo` of the selected operators, computed on first access.

        A power iteration; when the a-priori bound already proves convergence, :meth:`fit` does not need it,
        and computing it there cost several times the propagation itself (``benchmarks/results/speedups.md``).
        """
        self._check_fitted()
        if self._spectral is None:
            b0 = initial_beliefs(self.prior_, self._labels, self._train)  # as clp_beliefs builds it
            self._spectral = spectral_radius(self._graph, b0, self.H_, normalization=self._spectral_normalization)
        return self._spectral

    def _check_closed_form(self, verb: str, why: str) -> None:
        """ValueError (``"VERB: the chosen model is ..., WHY"``) where the chosen model is the nonlinear (authors')
        step or the per-step L1 variant, which :meth:`explain` and :meth:`update` do not cover."""
        if not self.propagated_:
            return
        if self.nonlinear_ is not None:
            raise ValueError(f"{verb}: the chosen model is the nonlinear (authors') propagation step, {why}")
        if self.l1_normalize_:
            raise ValueError(f"{verb}: the chosen model is the per-step L1-normalized propagation, {why}")

    def _check_fitted(self):
        if not self.__dict__.get("_fitted", False):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet: call fit(graph, "
                                 "features, labels, ...) first")

    transductive = True
    """``predict_proba()`` takes no features: it predicts the nodes of the graph it was fitted on
    (:func:`jaxclp.priors.fit_prior` reads this to use a fitted CLP as a prior)."""

    def predict_proba(self) -> jax.Array:
        """(n, K) beliefs of the selected configuration, rows normalized to sum to 1; columns follow
        ``classes_``."""
        self._check_fitted()
        s = self.beliefs_.sum(axis=1, keepdims=True)
        return jnp.where(s > 0, self.beliefs_ / jnp.where(s > 0, s, 1.0), 1.0 / self.num_classes_)

    def predict(self) -> np.ndarray:
        """(n,) predicted labels, in the user's label values (``classes_[argmax(predict_proba())]``)."""
        self._check_fitted()
        return self.classes_[np.asarray(jnp.argmax(self.predict_proba(), axis=1))]

    def explain(self, nodes, *, tol: float = 1e-6):
        """Exact explanation of the fitted closed form's scores (``beliefs_``) at ``nodes``: every source node's
        term, the training nodes' sum and the prior's (:func:`jaxclp.explain.explain`, with ``H_``, the edge
        weights from ``B0`` and the chosen variant held fixed).

        Where validation kept the prior alone (``propagated_`` False, ``alpha_ = 0``) every score is the node's own
        prior row: the explanation says so (one term, the node itself, counted in ``prior_term`` even for a training
        node; ``method`` "identity", ``train_mask`` all False).

        Args:
            nodes: a node index or a 1-D list of indices (0..n-1).
            tol: the solvers' tolerance.

        Returns:
            :class:`jaxclp.explain.Explanation`.

        Raises:
            ValueError: unfitted; the chosen model is the nonlinear (authors') step or the per-step L1 variant
                (not linear in the start: not covered); bad ``nodes``.
        """
        self._check_fitted()
        self._check_closed_form("explain", "which is not linear in its start; only the linear closed form is "
                                           "explained")
        if not self.propagated_:  # the prior alone (alpha 0, D = the prior): no label enters a score
            return explain(self._graph, self.prior_, self._labels, jnp.zeros_like(self._train), self.H_, 0.0, nodes)
        return explain(self._graph, self.prior_, self._labels, self._train, self.H_, float(self.alpha_), nodes,
                       normalization=self.normalization_, prior_source=self.prior_source_,
                       spectral_scale=bool(self.spectral_scale_), method=self.method, tol=tol)

    def update(self, labels, train_mask=None, *, reestimate_compatibility: bool = False, tol: float = 1e-6,
               max_iters: int = 10_000, cold: bool = False):
        """Takes new or corrected labels and re-solves the fitted closed form from its previous solution (a warm
        start, :mod:`jaxclp.update`): the fitted prior (``prior_``), alpha, variant and solver stay; ``B0``, the
        edge weights and (``prior_source`` "b0") the propagated start are rebuilt from the new labels; H is kept
        unless ``reestimate_compatibility``. The result equals a cold solve of the same system to ``tol``.

        Example::

            y = model_labels.copy(); y[new_nodes] = new_values      # (n,) user label values, -1 unlabelled
            res = model.update(y)                                  # every labelled node now enters B0
            res.iterations                                         # (warm, cold) per class; cold with cold=True
            model.predict()                                        # the updated predictions

        Args:
            labels: (n,) int labels in the user's values (those of ``classes_``), -1 for unlabelled; the full
                label vector after the change (corrected labels simply differ from the fitted ones).
            train_mask: (n,) bool, the nodes whose labels enter the propagation; None (default): every node whose
                label is not -1 (so validation labels passed in ``labels`` are used too: the choices of the fit
                are kept, and no validation is needed to update).
            reestimate_compatibility: re-estimate H (and ``sinkhorn_``) from the new labels, as a fit does; False
                keeps ``H_``.
            tol, max_iters: the solver's tolerance (the fit's is 1e-6) and iteration cap.
            cold: also solve the same system from the solver's own start (``UpdateResult.cold``: iterations and
                values to compare).

        Returns:
            :class:`jaxclp.update.UpdateResult` (also kept as ``update_``); ``beliefs_``, ``train_mask_`` (and
            ``H_``) now describe the updated model: :meth:`predict`, :meth:`predict_proba` and :meth:`explain` use
            them. ``val_mask_``, ``val_score_`` and ``val_scores_`` still describe the fit. Where validation kept
            the prior alone (``propagated_`` False) labels do not enter the scores: the beliefs stay the prior
            (``method`` "identity").

        Raises:
            ValueError: unfitted; bad ``labels`` / ``train_mask`` (a label outside ``classes_``, -1 on a
                ``train_mask`` node, wrong shape; named); a chosen model that is not the linear closed form (the
                per-step L1 or the nonlinear step: refit instead).
        """
        self._check_fitted()
        self._check_closed_form("update", "not a closed form; refit with the new labels instead")
        n = self._graph.num_nodes
        y_user = _checks.integer_labels("labels", labels)
        _checks.shape("labels", y_user, (n,))
        if np.any(y_user < -1):
            raise ValueError(f"labels must be class ids >= 0, or -1 for unlabelled nodes; got {int(y_user.min())}")
        if train_mask is None:
            tm = y_user != -1
        else:
            _checks.mask("train_mask", train_mask, n)
            tm = np.asarray(train_mask, bool)
            if np.any(y_user[tm] == -1):
                nodes = np.flatnonzero(tm & (y_user == -1))
                raise ValueError(f"labels is -1 (unlabelled) on {nodes.size} train_mask node(s), e.g. "
                                 f"{nodes[:5].tolist()}: every train_mask node needs a label")
        if not tm.any():
            raise ValueError("labels: no labelled node (every label is -1): update needs labelled nodes")
        unknown = tm & ~np.isin(y_user, self.classes_)
        if unknown.any():
            nodes = np.flatnonzero(unknown)
            raise ValueError(f"labels must be one of classes_ {self.classes_.tolist()} on labelled nodes; got "
                             f"{np.unique(y_user[unknown])[:5].tolist()} at node(s) {nodes[:5].tolist()} (a new "
                             "class needs a refit)")
        y = jnp.asarray(np.where(tm, np.searchsorted(self.classes_, np.where(tm, y_user, self.classes_[0])), 0),
                        jnp.int32)
        train = jnp.asarray(tm)
        if not self.propagated_:  # the prior alone: labels do not enter its scores
            res = UpdateResult(self.prior_, self.H_, None, None, None, train, 0.0, "identity")
        else:
            res = update_beliefs(self._graph, self.prior_, y, train, self.H_, float(self.alpha_), self.beliefs_,
                                 normalization=self.normalization_, prior_source=self.prior_source_,
                                 spectral_scale=bool(self.spectral_scale_),
                                 reestimate_compatibility=reestimate_compatibility, method=self.method_, tol=tol,
                                 max_iters=max_iters, cold=cold)
            self.beliefs_ = res.beliefs
            if reestimate_compatibility:
                self.H_, self.sinkhorn_ = res.H, res.sinkhorn
            self._spectral = None  # the operators changed: spectral_ is recomputed on access
        self._train, self._labels, self.train_mask_ = train, y, tm
        self.update_ = res
        return res
