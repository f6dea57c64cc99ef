"""Train/validation/test splits: seeded random splits as in the CLP paper, and published fixed splits.

The CLP paper evaluates on random splits that are *not* class-balanced: for each split the nodes are permuted
uniformly at random and the first ``train`` fraction is used for training, the next ``val`` fraction for
validation and the rest for testing. Split densities: sparse 5/5/90, medium 10/10/80, dense 48/32/20 (%).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

__all__ = ["Splits", "SPLIT_KINDS", "random_splits", "published_splits", "split_sizes", "holdout_split", "parse_split"]

SPLIT_KINDS: dict[str, tuple[float, float]] = {
    "sparse": (0.05, 0.05),
    "medium": (0.10, 0.10),
    "dense": (0.48, 0.32),
}


@dataclasses.dataclass(frozen=True, eq=False)
class Splits:
    """A stack of train/validation/test splits.

    Attributes:
        train: (num_splits, n) bool masks.
        val: (num_splits, n) bool masks.
        test: (num_splits, n) bool masks.
        seeds: the seed of each split (None for published splits).
        name: description, e.g. ``"sparse"`` or ``"texas/published"``.
    """

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    seeds: list[int] | None = None
    name: str = ""

    def __post_init__(self):
        shapes = {np.shape(self.train), np.shape(self.val), np.shape(self.test)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise ValueError(f"train/val/test must be (num_splits, n) arrays of one shape; got {shapes}")
        for k in ("train", "val", "test"):
            a = getattr(self, k)
            if a.dtype != np.bool_:
                object.__setattr__(self, k, np.asarray(a).astype(bool))
        if self.seeds is not None and len(self.seeds) != self.num_splits:
            raise ValueError(f"{len(self.seeds)} seeds for {self.num_splits} splits")

    @property
    def num_splits(self) -> int:
        return int(self.train.shape[0])

    @property
    def num_nodes(self) -> int:
        return int(self.train.shape[1])

    def __len__(self) -> int:
        return self.num_splits

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Masks of split ``i``: ``(train, val, test)``, each (n,) bool."""
        return self.train[i], self.val[i], self.test[i]

    def indices(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node indices of split ``i``: ``(train_idx, val_idx, test_idx)`` int arrays."""
        return tuple(np.flatnonzero(m) for m in self[i])

    def sizes(self) -> np.ndarray:
        """(num_splits, 3) numbers of train/val/test nodes."""
        return np.stack([self.train.sum(1), self.val.sum(1), self.test.sum(1)], axis=1)


def split_sizes(num_nodes: int, train: float, val: float) -> tuple[int, int, int]:
    """Sizes ``(n_train, n_val, n_test)``: rounded fractions, test = the rest."""
    n_train = int(round(train * num_nodes))
    n_val = int(round(val * num_nodes))
    n_val = min(n_val, num_nodes - n_train)
    return n_train, n_val, num_nodes - n_train - n_val


def _fractions(kind_or_fractions) -> tuple[float, float, str]:
    if isinstance(kind_or_fractions, str) and "/" in kind_or_fractions:
        kind_or_fractions = [float(v) for v in kind_or_fractions.split("/")[:2]]
    if isinstance(kind_or_fractions, str):
        if kind_or_fractions not in SPLIT_KINDS:
            raise ValueError(f"unknown split kind {kind_or_fractions!r}; use one of {list(SPLIT_KINDS)} or a "
                             "(train, val) fraction tuple")
        tr, va = SPLIT_KINDS[kind_or_fractions]
        return tr, va, kind_or_fractions
    try:
        tr, va = (float(x) for x in kind_or_fractions)
    except (TypeError, ValueError):
        raise ValueError(f"kind_or_fractions must be a split kind or a (train, val) pair; got "
                         f"{kind_or_fractions!r}") from None
    if not (0 < tr < 1 and 0 <= va < 1 and tr + va < 1):
        raise ValueError(f"fractions must satisfy 0 < train, 0 <= val, train + val < 1; got ({tr}, {va})")
    return tr, va, f"{tr:g}/{va:g}/{1 - tr - va:g}"


def parse_split(text: str) -> str:
    """A split name as the runner and its records use it: ``"sparse"``, ``"medium"``, ``"dense"``, ``"published"``,
    or label rates ``TRAIN/VAL[/TEST]`` as fractions or percents (``"0.6/0.2/0.2"``, ``"60/20/20"``, ``"60,20"``)
    in the canonical form ``"0.6/0.2/0.2"`` (what :func:`random_splits` names such splits).

    Raises:
        ValueError: anything else, a test share that does not complete train + val to 1 (100 %), or shares
            outside ``0 < train``, ``0 < val``, ``train + val < 1``.
    """
    t = str(text).strip()
    if t in SPLIT_KINDS or t == "published":
        return t
    parts = t.replace(",", "/").split("/")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        vals = []
    if len(vals) not in (2, 3):
        raise ValueError(f"split must be one of {list(SPLIT_KINDS) + ['published']} or TRAIN/VAL[/TEST] label rates "
                         f"(e.g. 0.6/0.2/0.2 or 60/20/20); got {text!r}")
    if max(vals) > 1:
        vals = [v / 100.0 for v in vals]
    if len(vals) == 3 and abs(sum(vals) - 1.0) > 1e-6:
        raise ValueError(f"split {text!r}: train + val + test must be 1 (100 %); got {sum(vals):g}")
    tr, va = vals[0], vals[1]
    if not (0 < tr < 1 and 0 < va < 1 and tr + va < 1):
        raise ValueError(f"split {text!r}: need 0 < train, 0 < val (selection needs validation nodes) and "
                         f"train + val < 1; got ({tr:g}, {va:g})")
    return _fractions((tr, va))[2]


def random_splits(num_nodes: int, kind_or_fractions="sparse", num_splits: int = 10, seed: int = 0,
                  labelled=None) -> Splits:
    """Random, not class-balanced, train/val/test splits.

    Split ``i`` uses ``numpy.random.default_rng(seed + i)``: a uniform permutation of the nodes; the first
    ``round(train * n)`` are train, the next ``round(val * n)`` validation, the rest test. With ``labelled``,
    only the labelled nodes are split (n = their count, permuted in node order); unlabelled nodes are in no mask:
    they stay in the graph (propagation runs through them) and are never trained on or scored.

    Args:
        num_nodes: n.
        kind_or_fractions: ``"sparse"`` (5/5/90), ``"medium"`` (10/10/80), ``"dense"`` (48/32/20), a
            ``(train, val)`` pair of fractions (test = the rest), or a :func:`parse_split` name such as
            ``"0.6/0.2/0.2"``.
        num_splits: number of splits.
        seed: base seed; the seeds used are recorded in ``Splits.seeds``.
        labelled: optional (num_nodes,) bool mask of the nodes that have a label (e.g. ``dataset.labels >= 0``).
            None or all True: every node is split (the same splits, bit for bit).

    Returns:
        :class:`Splits` with masks of shape (num_splits, num_nodes): disjoint, covering all (labelled) nodes.
    """
    if labelled is not None:
        lab = np.asarray(labelled)
        if lab.shape != (int(num_nodes),) or lab.dtype != np.bool_:
            raise ValueError(f"labelled must be a ({int(num_nodes)},) bool mask; got {lab.dtype} {lab.shape}")
        if not lab.all():
            idx = np.flatnonzero(lab)
            if idx.size == 0:
                raise ValueError("labelled: no node has a label; nothing to split")
            sub = random_splits(idx.size, kind_or_fractions, num_splits, seed)
            masks = {}
            for k in ("train", "val", "test"):
                m = np.zeros((sub.num_splits, int(num_nodes)), dtype=bool)
                m[:, idx] = getattr(sub, k)
                masks[k] = m
            return Splits(**masks, seeds=sub.seeds, name=sub.name)
    n = int(num_nodes)
    if n < 1:
        raise ValueError(f"num_nodes must be >= 1; got {num_nodes}")
    if int(num_splits) < 1:
        raise ValueError(f"num_splits must be >= 1; got {num_splits}")
    tr, va, name = _fractions(kind_or_fractions)
    n_train, n_val, _ = split_sizes(n, tr, va)
    seeds = [int(seed) + i for i in range(int(num_splits))]
    role = np.empty((len(seeds), n), dtype=np.int8)  # 0 train, 1 val, 2 test
    ranks = np.empty(n, dtype=np.int8)
    ranks[:n_train] = 0
    ranks[n_train:n_train + n_val] = 1
    ranks[n_train + n_val:] = 2
    for i, s in enumerate(seeds):
        perm = np.random.default_rng(s).permutation(n)
        role[i, perm] = ranks
    return Splits(train=role == 0, val=role == 1, test=role == 2, seeds=seeds, name=name)


def holdout_split(labels, val_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Every labelled node in training or validation, stratified by class: what a model fitted for predicting a
    graph's unlabelled nodes uses (``jaxclp predict``, :meth:`jaxclp.CLP.fit` without masks).

    The m labelled nodes (label != -1) are permuted by ``numpy.random.default_rng(seed)``; of each class's
    ``m_c`` nodes, the first ``min(round(val_fraction * m_c), m_c - 1)`` in permutation order are validation, the
    rest training (every class keeps a training node: a class seen only on validation could not be learned; each
    class is ``val_fraction`` of the validation part as of the labels, as scikit-learn's stratified splits). Then,
    while validation holds fewer than two classes, the first training node in permutation order of a class not on
    validation that keeps at least two training nodes moves to validation (a one-class validation part selects
    nothing; with few labels, e.g. 2 validation nodes, it is common).

    Stratified, a permutation that happens to order the nodes by class cannot make a one-class validation part:
    minesweeper's mines are exactly ``default_rng(0).permutation(10000)[:2000]``, so an unstratified 20 %
    hold-out with seed 0 held 1999 mines and one other node.

    Args:
        labels: (n,) integer labels, -1 for unlabelled nodes.
        val_fraction: in (0, 1).
        seed: permutation seed.

    Returns:
        ``(train, val)``: (n,) bool masks, disjoint, covering exactly the labelled nodes.

    Raises:
        ValueError: ``val_fraction`` outside (0, 1); fewer than 2 labelled nodes; no validation node left.
    """
    y = np.asarray(labels)
    if not 0.0 < float(val_fraction) < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1); got {val_fraction}")
    idx = np.flatnonzero(y != -1)
    if idx.size < 2:
        raise ValueError(f"{idx.size} labelled node(s): a hold-out needs at least one training and one "
                         "validation node")
    perm = idx[np.random.default_rng(int(seed)).permutation(idx.size)]
    train, val = np.zeros(y.shape[0], bool), np.zeros(y.shape[0], bool)
    train[perm] = True
    for c in np.unique(y[idx]):
        nodes = perm[y[perm] == c]  # class c in permutation order
        n_val = min(round(float(val_fraction) * nodes.size), nodes.size - 1)
        val[nodes[:n_val]], train[nodes[:n_val]] = True, False
    # any integer labels: counts by value
    counts = dict(zip(*(a.tolist() for a in np.unique(y[train], return_counts=True))))
    while np.unique(y[val]).size < 2:
        on_val = set(y[val].tolist())
        move = next((i for i in perm if train[i] and y[i].item() not in on_val and counts[y[i].item()] >= 2), None)
        if move is None:
            break
        train[move], val[move] = False, True
        counts[y[move].item()] -= 1
    if not val.any():
        raise ValueError("holdout_split: no validation node left after giving every class a training node; "
                         "label more nodes or raise val_fraction")
    return train, val


def published_splits(dataset) -> Splits:
    """The published fixed splits of a dataset (e.g. the 10 Geom-GCN splits).

    Raises:
        ValueError: the dataset has none.
    """
    if getattr(dataset, "splits", None) is None:
        raise ValueError(f"dataset {getattr(dataset, 'name', dataset)!r} has no published splits; "
                         "use random_splits(...)")
    return dataset.splits


def stack_splits(splits: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], name: str = "") -> Splits:
    """Builds :class:`Splits` from a list of ``(train, val, test)`` (n,) masks."""
    tr, va, te = (np.stack([s[k] for s in splits]).astype(bool) for k in range(3))
    return Splits(train=tr, val=va, test=te, name=name)
