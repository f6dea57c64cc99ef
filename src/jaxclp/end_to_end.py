"""End-to-end training of the prior through the closed-form CLP (the "label trick").

The paper trains the MLP prior ``D`` on its own (cross-entropy of ``softmax(mlp(x))``) and then propagates it.
Here the MLP is trained THROUGH the propagation: the loss is the cross-entropy of CLP's output::

    B = (1 - a) (I - a A^F)^{-1} D,    D = softmax(mlp(x)),
    A^F_k = diag(B0[:, k]) Ahat diag((B0 H)[:, k]),    B0 = M_fed * Y + (1 - M_fed) * D

on training nodes, differentiated through the linear solve (implicit differentiation:
:func:`jaxclp.solve.solve_operator` wraps every solver in ``jax.lax.custom_linear_solve``, so the gradient costs one
adjoint solve, ``A^F_k.T``, and the solver loops are never unrolled).

Label trick. CLP feeds the training labels into ``B0`` (and ``H``); for a training node ``r`` whose own label
is in ``B0``, row ``r`` of ``A^F_k`` is zero for every class ``k`` but its label, so the propagation adds mass
only to the correct class and its cross-entropy would reward the label leak, not the prior. Every epoch the
training nodes are therefore split at random (explicit PRNG key, :func:`label_trick_split`) into

* "fed" nodes (``fed_fraction`` of them, rounded down): their labels go into ``B0`` and into ``H``;
* "scored" nodes (the rest): the loss is the cross-entropy of their CLP output; their labels enter
  neither ``B0`` nor ``H`` (only as the cross-entropy's target).

Choices (documented here once):

* ``H`` is re-estimated every step from the FED labels and the current prior (:func:`jaxclp.
  estimate_compatibility`, i.e. ``Sinkhorn((M_fed Y)^T A B0_fed)``) and held constant under differentiation
  (``stop_gradient``: Sinkhorn's ``while_loop`` is not reverse-differentiable, and a gradient through the
  estimator would train the prior to move ``H``, not to predict). ``D`` is differentiated everywhere else:
  as the right-hand side of the solve and inside ``B0`` (both scalings of the operator).
* ``alpha`` is on a grid (:data:`DEFAULT_ALPHAS`), one fit per alpha, the alpha chosen on validation with the
  task metric, as every other CLP variant of the library. A learnable alpha would be trained on the training
  cross-entropy (not on what selection measures), and the solve's cost grows like ``1 / (1 - a rho)`` as it
  drifts toward 1; the grid keeps each fit a fixed, well-conditioned problem. Only ``normalization`` "sym"
  and "row" are accepted: there ``rho(A^F_k) <= 1`` is proven (:func:`jaxclp.operator.a_priori_bound`), so
  every alpha in (0, 1) converges.
* Solver: the Neumann iteration (``method="neumann"``, one SpMM a step, no inner products; CLP's operator has
  a small spectral radius, so few steps suffice), differentiable through ``custom_linear_solve``.
* Warm start: the MLP is first fitted alone exactly as the paper's prior (:func:`jaxclp.fit_mlp` with the
  same key, early stopped on validation), or taken from ``init_params``; epoch -1 of the end-to-end fit (no
  update yet) is a candidate of its early stopping, so for every alpha the returned model is never worse on
  validation than the pretrained prior propagated by CLP (``clp_beliefs(..., normalization=...)``, up to
  solver round-off).
* Validation (early stopping and the choice of alpha): the CLP output with ALL training labels fed
  (``B0`` and ``H`` from the whole training set, as at prediction time), scored with ``cfg.metric`` on the
  raw beliefs (as :func:`jaxclp.experiments.candidates.select` scores them), ties broken by the validation
  cross-entropy of the row-normalized beliefs.
* Updates whose gradient has a NaN/inf entry are skipped (counted in ``EndToEndResult.nonfinite_steps``).
* Features: dense (float32; float64 runs the fine-tuning in float64), scipy.sparse or
  :class:`jaxclp.features.SparseFeatures` (the MLP's sparse first layer, never densified). The model is the library's
  MLP (:class:`jaxclp.mlp.MLP`); LINKX or a GNN prior is not offered here.

Cost per epoch: the MLP forward and backward, two Sinkhorn estimates of ``H`` (K x K), and three Neumann
solves (the label-trick forward, its adjoint, and the all-fed validation prediction), each a few K-wide SpMMs.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxclp import _checks
from jaxclp._rng import fast_key
from jaxclp.compatibility import estimate_compatibility
from jaxclp.features import as_features
from jaxclp.graph import Graph
from jaxclp.metrics import evaluate
from jaxclp.mlp import MLP, fit_mlp
from jaxclp.operator import clp_operator
from jaxclp.solve import solve_operator
from jaxclp.train import TrainConfig, make_optimizer, validation_metric

DEFAULT_ALPHAS = (0.1, 0.3, 0.5, 0.7, 0.9)
"""Alpha grid of :func:`fit_end_to_end` (one fit per alpha; half of the paper's 0.1..0.9 grid)."""
DEFAULT_CONFIG = TrainConfig(lr=0.01, weight_decay=5e-5, epochs=200, patience=30)
"""Fine-tuning settings of :func:`fit_end_to_end` (the paper's optimiser; fewer epochs: it starts warm)."""
DEFAULT_FED_FRACTION = 0.5
"""Fraction of the training nodes whose labels are fed into ``B0``/``H`` each epoch (the rest are scored)."""
NORMALIZATIONS = ("sym", "row")


class EndToEndResult(NamedTuple):
    """Output of :func:`fit_end_to_end`.

    Attributes:
        beliefs: (n, K) CLP beliefs (raw, not row-normalized, as :func:`jaxclp.clp_beliefs`) of the selected
            alpha and epoch, all training labels fed.
        alpha: the selected alpha (float).
        epochs: epochs run for the selected alpha (int).
        best_epoch: 0-based epoch of the selected parameters for the selected alpha (-1: the warm start).
        val_score: validation ``cfg.metric`` of ``beliefs`` (float).
        prior: (n, K) the fine-tuned MLP softmax D of the selected model.
        H: (K, K) compatibility of ``beliefs`` (all training labels, ``prior``).
        params: the selected MLP parameters.
        alphas: (A,) the grid.
        all_beliefs: (A, n, K) the beliefs of every alpha at its own best epoch.
        val_scores: (A,) their validation metric.
        pretrained_val_scores: (A,) validation metric of the warm start (epoch -1) for every alpha.
        best_epochs, epochs_run: (A,) int per alpha.
        train_loss: (A, cfg.epochs) label-trick training loss per epoch (NaN after early stopping).
        nonfinite_steps: (A,) updates skipped because a gradient entry was NaN/inf (0 expected).
        converged: (A,) bool: every solve of that alpha's fit reached the solver tolerance.
    """

    beliefs: jax.Array
    alpha: float
    epochs: int
    best_epoch: int
    val_score: float
    prior: jax.Array
    H: jax.Array
    params: Any
    alphas: np.ndarray
    all_beliefs: jax.Array
    val_scores: np.ndarray
    pretrained_val_scores: np.ndarray
    best_epochs: np.ndarray
    epochs_run: np.ndarray
    train_loss: np.ndarray
    nonfinite_steps: np.ndarray
    converged: np.ndarray


class LossAux(NamedTuple):
    """Auxiliary output of :func:`end_to_end_loss`.

    Attributes:
        beliefs: (n, K) CLP output with only the fed labels in ``B0`` / ``H``.
        H: (K, K) the compatibility used (estimated from the fed labels unless given).
        fed, scored: (n,) bool, the label-trick partition of the training nodes.
        converged: () bool, the solve reached its tolerance for every class.
    """

    beliefs: jax.Array
    H: jax.Array
    fed: jax.Array
    scored: jax.Array
    converged: jax.Array


# ------------------------------------------------------------------------------------------- pure pieces
def label_trick_split(key: jax.Array, train_mask: jax.Array, fed_fraction: float = DEFAULT_FED_FRACTION):
    """Random partition of the training nodes into fed and scored ones (jittable).

    Exactly ``floor(fed_fraction * |train|)`` training nodes are fed, chosen uniformly at random by ``key``.

    Args:
        key: PRNG key.
        train_mask: (n,) bool.
        fed_fraction: fraction of the training nodes whose labels are fed, in (0, 1).

    Returns:
        ``(fed, scored)``: (n,) bool each, disjoint, ``fed | scored == train_mask``.
    """
    n = train_mask.shape[0]
    u = jnp.where(train_mask, jax.random.uniform(key, (n,)), 2.0)  # non-training nodes rank last
    rank = jnp.argsort(jnp.argsort(u))
    n_fed = jnp.floor(fed_fraction * jnp.sum(train_mask)).astype(rank.dtype)
    fed = train_mask & (rank < n_fed)
    return fed, train_mask & ~fed


def fed_compatibility(graph: Graph, prior: jax.Array, labels: jax.Array, fed_mask: jax.Array) -> jax.Array:
    """(K, K) ``H = Sinkhorn((M_fed Y)^T A B0_fed)`` from the fed labels only, a constant under differentiation.

    Args:
        graph: the graph.
        prior: (n, K) prior D (its gradient is stopped).
        labels: (n,) int labels; only ``fed_mask`` entries are read.
        fed_mask: (n,) bool.
    """
    H, _ = estimate_compatibility(graph, jax.lax.stop_gradient(prior), jnp.where(fed_mask, labels, 0), fed_mask)
    return jax.lax.stop_gradient(H)


def clp_output(graph: Graph, prior: jax.Array, labels: jax.Array, fed_mask: jax.Array, H: jax.Array, alpha, *,
               normalization: str = "sym", tol: float = 1e-6, max_iters: int = 2000):
    """Closed-form CLP ``(1-a)(I - a A^F_k)^{-1} D_k`` with only the fed labels in ``B0`` (differentiable).

    Args:
        graph: the graph.
        prior: (n, K) D, differentiated both as the right-hand side and inside ``B0``.
        labels: (n,) int labels; only ``fed_mask`` entries are read.
        fed_mask: (n,) bool: rows of ``B0`` replaced by the one-hot label.
        H: (K, K) compatibility.
        alpha: scalar in (0, 1) (may be traced).
        normalization: "sym" or "row".
        tol, max_iters: Neumann solver settings.

    Returns:
        ``(beliefs (n, K), converged () bool)``.
    """
    y = jax.nn.one_hot(jnp.where(fed_mask, labels, 0), prior.shape[1], dtype=prior.dtype)
    b0 = jnp.where(fed_mask[:, None], y, prior)
    op = clp_operator(graph, b0, H.astype(prior.dtype), normalization=normalization)
    sol = solve_operator(op, prior, alpha=alpha, method="neumann", tol=tol, max_iters=max_iters,
                         normalization=normalization)
    return sol.value, jnp.all(sol.converged)


def belief_cross_entropy(beliefs: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean over ``mask`` of ``-log(B[i, y_i] / sum_k B[i, k])`` (beliefs row-normalized; labels outside the
    mask never read). () scalar."""
    p = beliefs / jnp.sum(beliefs, axis=1, keepdims=True)
    y = jnp.where(mask, labels, 0)
    py = jnp.take_along_axis(p, y[:, None], axis=1)[:, 0]
    ce = -jnp.log(jnp.maximum(py, jnp.finfo(p.dtype).tiny))
    return jnp.sum(jnp.where(mask, ce, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def end_to_end_loss(params, key: jax.Array, apply_fn: Callable, graph: Graph, labels: jax.Array,
                    train_mask: jax.Array, alpha, *, fed_fraction: float = DEFAULT_FED_FRACTION,
                    H: jax.Array | None = None, normalization: str = "sym", tol: float = 1e-6, max_iters: int = 2000,
                    train: bool = True):
    """The label-trick training loss of one step (pure, jittable; ``jax.grad`` w.r.t. ``params``).

    ``key`` is split into the label-trick key (:func:`label_trick_split`) and the dropout key given to
    ``apply_fn``. ``D = softmax(apply_fn(params, dropout_key, train))``; ``H`` (unless given) is
    :func:`fed_compatibility` of the fed labels and ``D`` (held constant); the loss is
    :func:`belief_cross_entropy` of :func:`clp_output` on the scored nodes.

    Args:
        params: model parameters.
        key: PRNG key of this step.
        apply_fn: ``apply_fn(params, key, train) -> (n, K) logits``.
        graph: the graph.
        labels: (n,) int labels; only ``train_mask`` entries are read.
        train_mask: (n,) bool.
        alpha: scalar in (0, 1).
        fed_fraction: fraction of training nodes fed.
        H: optional (K, K) compatibility to use instead of the fed estimate.
        normalization, tol, max_iters: as :func:`clp_output`.
        train: passed to ``apply_fn`` (dropout on).

    Returns:
        ``(loss (), LossAux)``.
    """
    split_key, drop_key = jax.random.split(key)
    fed, scored = label_trick_split(split_key, train_mask, fed_fraction)
    d = jax.nn.softmax(apply_fn(params, drop_key, train), axis=-1)
    if H is None:
        H = fed_compatibility(graph, d, labels, fed)
    b, conv = clp_output(graph, d, labels, fed, H, alpha, normalization=normalization, tol=tol,
                         max_iters=max_iters)
    return belief_cross_entropy(b, labels, scored), LossAux(b, H, fed, scored, conv)


# ----------------------------------------------------------------------------------------- training loop
def _all_fed(apply_fn, params, key, graph, labels, train_mask, alpha, normalization, tol, max_iters):
    """Prediction-time CLP: every training label fed. Returns (beliefs, prior, H, converged)."""
    d = jax.nn.softmax(apply_fn(params, key, False), axis=-1)
    H = fed_compatibility(graph, d, labels, train_mask)
    b, conv = clp_output(graph, d, labels, train_mask, H, alpha, normalization=normalization, tol=tol,
                         max_iters=max_iters)
    return b, d, H, conv


def _mlp_apply(hidden, num_classes, dropout, features):
    model = MLP(hidden=hidden, num_classes=num_classes, dropout=dropout)

    def apply_fn(p, k, train):
        return model.apply(p, features, train=train, rngs={"dropout": fast_key(k)})  # jaxclp/_rng.py

    return apply_fn


def _score(metric, beliefs, labels, val_mask):
    """(validation metric with NaN -> -inf, validation cross-entropy) of raw beliefs."""
    m = evaluate(metric, beliefs, labels, val_mask)
    return jnp.where(jnp.isnan(m), -jnp.inf, m), belief_cross_entropy(beliefs, labels, val_mask)


def _predict_kernel(params, key, features, graph, labels, train_mask, val_mask, alpha, *, num_classes, hidden,
                    dropout, metric, normalization, tol, max_iters):
    """All-fed prediction of one model and its validation score (jitted separately from the loop)."""
    apply_fn = _mlp_apply(hidden, num_classes, dropout, features)
    labels = jnp.where(train_mask | val_mask, labels, 0)
    b, d, H, conv = _all_fed(apply_fn, params, key, graph, labels, train_mask, alpha, normalization, tol,
                             max_iters)
    m, vloss = _score(metric, b, labels, val_mask)
    return dict(beliefs=b, prior=d, H=H, converged=conv, val=m, val_loss=vloss)


_predict = jax.jit(_predict_kernel, static_argnames=("num_classes", "hidden", "dropout", "metric",
                                                     "normalization", "max_iters"))


def _fit_alpha_kernel(params, key, features, graph, labels, train_mask, val_mask, alpha, m0, l0, *, num_classes,
                      hidden, dropout, cfg, fed_fraction, normalization, tol, max_iters):
    """One alpha's end-to-end fit from ``params`` (whose validation score/loss are ``m0``/``l0``); jitted with
    ``alpha`` traced, so every alpha shares one compile."""
    apply_fn = _mlp_apply(hidden, num_classes, dropout, features)
    opt = make_optimizer(cfg)
    labels = jnp.where(train_mask | val_mask, labels, 0)
    loss_kw = dict(fed_fraction=fed_fraction, normalization=normalization, tol=tol, max_iters=max_iters)

    def loss_fn(p, k):
        loss, aux = end_to_end_loss(p, k, apply_fn, graph, labels, train_mask, alpha, **loss_kw)
        return loss, aux.converged

    def score(p):
        b, _, _, conv = _all_fed(apply_fn, p, key, graph, labels, train_mask, alpha, normalization, tol, max_iters)
        return (*_score(cfg.metric, b, labels, val_mask), conv)

    dtype = jnp.result_type(l0)
    state = dict(params=params, opt=opt.init(params), best=params, best_m=m0, best_loss=l0,
                 best_epoch=jnp.int32(-1), bad=jnp.int32(0), epoch=jnp.int32(0), key=key, conv=jnp.bool_(True),
                 losses=jnp.full((cfg.epochs,), jnp.nan, dtype), nonfinite=jnp.int32(0))
    patience = cfg.patience

    def cond(s):
        stop = (patience > 0) & (s["bad"] >= patience)
        return (s["epoch"] < cfg.epochs) & ~stop

    def body(s):
        k, sub = jax.random.split(s["key"])
        (loss, conv), grads = jax.value_and_grad(loss_fn, has_aux=True)(s["params"], sub)
        ok = jnp.isfinite(loss)
        for g in jax.tree_util.tree_leaves(grads):
            ok = ok & jnp.all(jnp.isfinite(g))
        keep = lambda new, old: jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, old)
        grads = jax.tree_util.tree_map(lambda g: jnp.where(ok, g, 0.0), grads)
        updates, opt_state = opt.update(grads, s["opt"], s["params"])
        new = keep(optax.apply_updates(s["params"], updates), s["params"])
        opt_state = keep(opt_state, s["opt"])
        m, vloss, vconv = score(new)
        better = (m > s["best_m"]) | ((m == s["best_m"]) & (vloss < s["best_loss"]))
        pick = lambda a, b: jax.tree_util.tree_map(lambda x, y: jnp.where(better, x, y), a, b)
        return dict(params=new, opt=opt_state, best=pick(new, s["best"]), best_m=jnp.where(better, m, s["best_m"]),
                    best_loss=jnp.where(better, vloss, s["best_loss"]),
                    best_epoch=jnp.where(better, s["epoch"], s["best_epoch"]),
                    bad=jnp.where(better, 0, s["bad"] + 1), epoch=s["epoch"] + 1, key=k,
                    conv=s["conv"] & conv & vconv, losses=s["losses"].at[s["epoch"]].set(loss),
                    nonfinite=s["nonfinite"] + (~ok).astype(jnp.int32))

    s = jax.lax.while_loop(cond, body, state)
    return dict(params=s["best"], best_epoch=s["best_epoch"], epochs=s["epoch"], losses=s["losses"],
                nonfinite=s["nonfinite"], converged=s["conv"])


_fit_alpha = jax.jit(_fit_alpha_kernel, static_argnames=("num_classes", "hidden", "dropout", "cfg", "fed_fraction",
                                                         "normalization", "max_iters"))


# ------------------------------------------------------------------------------------------------ public
def fit_end_to_end(
    key: jax.Array,
    graph: Graph,
    features,
    labels,
    train_mask,
    val_mask,
    num_classes: int,
    *,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    normalization: str = "sym",
    cfg: TrainConfig = DEFAULT_CONFIG,
    hidden: Sequence[int] = (64,),
    dropout: float = 0.5,
    fed_fraction: float = DEFAULT_FED_FRACTION,
    init_params=None,
    pretrain_cfg: TrainConfig | None = None,
    tol: float = 1e-6,
    max_iters: int = 2000,
) -> EndToEndResult:
    """Trains the MLP prior through the closed-form CLP (label trick), one fit per alpha; picks on validation.

    See the module docstring for the loss, the label trick and the choices (``H`` constant per step, alpha
    grid, Neumann solve, warm start, selection).

    Args:
        key: PRNG key. The warm start is :func:`jaxclp.fit_mlp` with ``key`` itself (the same fit as the
            paper's prior with this key); the end-to-end steps use ``jax.random.fold_in(key, 1)``.
        graph: the graph (a :class:`jaxclp.Graph`).
        features: (n, d) node features: dense (float32, or float64 with x64 on: the fine-tuning then runs in
            float64), scipy.sparse or :class:`jaxclp.features.SparseFeatures` (never densified).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool; at least 2 training nodes (one fed, one scored) and 1 validation node.
        num_classes: K >= 2.
        alphas: 1-D grid in (0, 1).
        normalization: "sym" or "row" (``Ahat`` of the propagation; both keep every alpha < 1 convergent).
        cfg: fine-tuning settings (lr, weight decay, epochs, patience, optimizer, and ``metric``: "accuracy" or
            "roc_auc", used for early stopping and for the choice of alpha).
        hidden, dropout: the MLP (as :func:`jaxclp.fit_mlp`).
        fed_fraction: fraction of the training nodes whose labels are fed each epoch, in (0, 1).
        init_params: parameters of ``MLP(hidden, num_classes, dropout)`` to start from (e.g.
            ``jaxclp.fit_mlp(...).params``); None: pretrain with :func:`jaxclp.fit_mlp`.
        pretrain_cfg: settings of that pretraining (default: the paper's ``TrainConfig(metric=cfg.metric)``).
        tol, max_iters: Neumann solver tolerance and iteration cap of every solve.

    Returns:
        :class:`EndToEndResult`.

    Raises:
        ValueError: naming the argument: ``graph`` not a Graph; ``features`` not (n, d) / not finite;
            a mask of the wrong shape/dtype, empty ``val_mask``, fewer than 2 training nodes or a
            ``fed_fraction`` that leaves no fed or no scored node; ``labels`` outside ``[0, K)`` on
            train/val; ``num_classes`` < 2; ``alphas`` empty, not 1-D or outside (0, 1); ``normalization``
            not "sym"/"row"; ``cfg`` not a TrainConfig, unknown ``cfg.metric``/``cfg.optimizer`` or
            ``cfg.epochs`` < 1; ``hidden``/``dropout``/``tol``/``max_iters`` out of range; ``init_params`` not
            matching the MLP.
    """
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a jaxclp Graph; got {type(graph).__name__}")
    n = graph.num_nodes
    if features is None:
        raise ValueError("features is None: end-to-end training needs node features")
    x = as_features(features)
    _checks.features(x, n)
    dtype = jnp.float64 if x.dtype == jnp.float64 else jnp.float32
    x = x.astype(dtype)
    _checks.mask("train_mask", train_mask, n)
    _checks.mask("val_mask", val_mask, n)
    _checks.num_classes(num_classes)
    k = int(num_classes)
    _checks.masked_labels(labels, n, k, train_mask, val_mask)
    alphas_arr = np.asarray(alphas, dtype=float)
    if alphas_arr.ndim != 1 or alphas_arr.size == 0:
        raise ValueError(f"alphas must be a non-empty 1-D sequence; got shape {alphas_arr.shape}")
    _checks.alpha(alphas_arr, "alphas")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS} (every alpha < 1 converges there); "
                         f"got {normalization!r}")
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"cfg must be a jaxclp.TrainConfig; got {type(cfg).__name__}")
    if int(cfg.epochs) < 1:
        raise ValueError(f"cfg.epochs must be >= 1; got {cfg.epochs}")
    validation_metric(cfg.metric)  # raises naming 'metric'
    make_optimizer(cfg)  # raises naming 'optimizer'
    if cfg.metric == "roc_auc" and k != 2:
        raise ValueError(f"cfg.metric 'roc_auc' needs num_classes == 2; got {k}")
    hidden = tuple(hidden)
    if any(isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1 for h in hidden):
        raise ValueError(f"hidden must be positive integers; got {hidden}")
    hidden = tuple(int(h) for h in hidden)
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout must lie in [0, 1); got {dropout}")
    if not 0.0 < float(fed_fraction) < 1.0:
        raise ValueError(f"fed_fraction must lie in (0, 1); got {fed_fraction}")
    n_train = int(np.sum(np.asarray(train_mask)))
    n_fed = int(np.floor(float(fed_fraction) * n_train))
    if n_fed < 1 or n_fed >= n_train:
        raise ValueError(f"train_mask has {n_train} node(s): fed_fraction={fed_fraction} feeds {n_fed} of them, "
                         "but the label trick needs at least one fed and one scored training node")
    if not float(tol) > 0:
        raise ValueError(f"tol must be > 0; got {tol}")
    if isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer)) or max_iters < 1:
        raise ValueError(f"max_iters must be an integer >= 1; got {max_iters!r}")

    labels = jnp.asarray(labels)
    train_mask, val_mask = jnp.asarray(train_mask), jnp.asarray(val_mask)
    model = MLP(hidden=hidden, num_classes=k, dropout=float(dropout))
    if init_params is None:
        pre = fit_mlp(key, x, labels, train_mask, val_mask, num_classes=k, hidden=hidden, dropout=float(dropout),
                      cfg=pretrain_cfg if pretrain_cfg is not None else TrainConfig(metric=cfg.metric))
        params = pre.params
    else:
        params = init_params
        want = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, x.shape[1]), dtype),
                                                 train=False))
        ok = jax.tree_util.tree_structure(want) == jax.tree_util.tree_structure(params) and all(
            np.shape(a) == b.shape for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(want)))
        if not ok:
            raise ValueError("init_params must be parameters of MLP(hidden, num_classes, dropout) for these "
                             f"features (hidden={hidden}, num_classes={k}, d={x.shape[1]})")
    params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), params)

    fit_key = jax.random.fold_in(key, 1)
    common = dict(num_classes=k, hidden=hidden, dropout=float(dropout), normalization=normalization,
                  max_iters=int(max_iters))
    outs = []
    for a in alphas_arr:
        a = jnp.asarray(a, dtype)
        args = (fit_key, x, graph, labels, train_mask, val_mask, a)
        p0 = _predict(params, *args, metric=cfg.metric, tol=float(tol), **common)
        fit = _fit_alpha(params, *args, p0["val"], p0["val_loss"], cfg=cfg, fed_fraction=float(fed_fraction),
                         tol=float(tol), **common)
        best = _predict(fit["params"], *args, metric=cfg.metric, tol=float(tol), **common)
        outs.append(dict(best, val0=p0["val"], params=fit["params"], best_epoch=fit["best_epoch"],
                         epochs=fit["epochs"], losses=fit["losses"], nonfinite=fit["nonfinite"],
                         converged=fit["converged"] & p0["converged"] & best["converged"]))
    vals = np.asarray([float(o["val"]) for o in outs])
    vloss = np.asarray([float(o["val_loss"]) for o in outs])
    i = min(range(len(outs)), key=lambda j: (-vals[j], vloss[j], j))
    o = outs[i]
    return EndToEndResult(
        beliefs=o["beliefs"], alpha=float(alphas_arr[i]), epochs=int(o["epochs"]), best_epoch=int(o["best_epoch"]),
        val_score=float(vals[i]), prior=o["prior"], H=o["H"], params=o["params"], alphas=alphas_arr,
        all_beliefs=jnp.stack([q["beliefs"] for q in outs]), val_scores=vals,
        pretrained_val_scores=np.asarray([float(q["val0"]) for q in outs]),
        best_epochs=np.asarray([int(q["best_epoch"]) for q in outs]),
        epochs_run=np.asarray([int(q["epochs"]) for q in outs]),
        train_loss=np.stack([np.asarray(q["losses"]) for q in outs]),
        nonfinite_steps=np.asarray([int(q["nonfinite"]) for q in outs]),
        converged=np.asarray([bool(q["converged"]) for q in outs]))
