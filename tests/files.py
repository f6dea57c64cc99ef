"""Small input files the tests of several folders write (tmp_path), so that no test module imports another."""

import numpy as np


def platonov_npz(path, n=40, classes=2, masks=True, seed=0):
    """A Platonov et al. layout .npz at ``path``: a ring of ``n`` nodes, ``classes`` labels, random features, and
    (``masks``) 3 published splits (2/4 train, 1/4 val, 1/4 test)."""
    rng = np.random.default_rng(seed)
    edges = np.stack([np.arange(n), (np.arange(n) + 1) % n], 1)
    arrays = {"node_features": rng.random((n, 3)).astype(np.float32), "node_labels": np.arange(n) % classes,
              "edges": edges}
    if masks:
        part = np.stack([np.roll(np.arange(n) % 4, s) for s in range(3)])  # 3 splits: 2/4 train, 1/4 val, 1/4 test
        arrays |= {"train_masks": part < 2, "val_masks": part == 2, "test_masks": part == 3}
    np.savez(path, **arrays)
    return path
