"""jaxclp.datasets.from_pyg: a PyG Data object (duck-typed; torch is not a dependency) as a Dataset."""

import types

import numpy as np
import pytest

from jaxclp import datasets as D


class FakeTensor:
    """What from_pyg touches of a torch tensor: detach().cpu().numpy(), and .layout / .to_dense() when sparse."""

    def __init__(self, a, sparse=False):
        self.a = np.asarray(a)
        self.layout = "torch.sparse_coo" if sparse else "torch.strided"
        self.is_sparse = sparse

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        assert not self.is_sparse, "a sparse tensor must be densified first"
        return self.a

    def to_dense(self):
        return FakeTensor(self.a)


def _data(n=12, splits=3, seed=0, **extra):
    rng = np.random.default_rng(seed)
    und = rng.integers(0, n, (2, 20))
    und = und[:, und[0] != und[1]]
    ei = np.concatenate([und, und[::-1]], axis=1)  # PyG: both directions
    x = rng.normal(size=(n, 5)).astype(np.float32)
    y = np.arange(n) % 3
    masks = np.zeros((3, n, splits), bool)
    for s in range(splits):
        for part, idx in enumerate(np.array_split(rng.permutation(n), 3)):
            masks[part, idx, s] = True
    d = types.SimpleNamespace(edge_index=FakeTensor(ei), x=FakeTensor(x), y=FakeTensor(y[:, None]), num_nodes=n,
                              train_mask=FakeTensor(masks[0]), val_mask=FakeTensor(masks[1]),
                              test_mask=FakeTensor(masks[2]))
    for k, v in extra.items():
        setattr(d, k, v)
    return d, ei, x, y, masks


def test_from_pyg_equals_the_same_graph_as_a_platonov_npz(tmp_path):
    d, ei, x, y, masks = _data()
    ds = D.from_pyg(d, name="mine")
    np.savez(tmp_path / "mine.npz", node_features=x, node_labels=y, edges=ei.T, train_masks=masks[0].T,
             val_masks=masks[1].T, test_masks=masks[2].T)
    ref = D.load_file(tmp_path / "mine.npz")
    assert ds.name == "mine" and ds.num_nodes == 12 and ds.num_classes == 3
    for a in ("senders", "receivers", "weights"):
        np.testing.assert_array_equal(np.asarray(getattr(ds.graph, a)), np.asarray(getattr(ref.graph, a)))
    np.testing.assert_array_equal(ds.labels, ref.labels)
    np.testing.assert_array_equal(ds.features, x)
    assert ds.splits.train.shape == (3, 12)  # PyG's (n, S) columns -> (S, n)
    for part in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(ds.splits, part), getattr(ref.splits, part))


def test_from_pyg_plain_arrays_one_split_sparse_x_weights_and_direction():
    d, ei, x, y, masks = _data(splits=1)
    d.x = FakeTensor(x, sparse=True)
    d.train_mask, d.val_mask, d.test_mask = (FakeTensor(masks[i][:, 0]) for i in range(3))
    d.edge_weight = np.linspace(0.5, 2.0, ei.shape[1])
    ds = D.from_pyg(d, directed=True)
    assert ds.splits.train.shape == (1, 12) and ds.graph.num_edges == len({tuple(e) for e in ei.T.tolist()})
    np.testing.assert_array_equal(ds.features, x)
    want = {}
    for e, v in zip(map(tuple, ei.T.tolist()), d.edge_weight):  # a repeated edge keeps its largest weight
        want[e] = max(want.get(e, 0.0), v)
    got = dict(zip(zip(np.asarray(ds.graph.senders).tolist(), np.asarray(ds.graph.receivers).tolist()),
                   np.asarray(ds.graph.weights).tolist()))
    assert got == pytest.approx(want)
    plain = types.SimpleNamespace(edge_index=ei, y=y)  # numpy only, no x, no masks: a featureless graph
    ds2 = D.from_pyg(plain)
    assert ds2.features is None and ds2.splits is None and ds2.num_nodes == 12


def test_from_pyg_refusals_name_the_attribute():
    d, ei, x, y, masks = _data()
    with pytest.raises(ValueError, match=r"data.y has shape \(12, 3\): multi-label"):
        D.from_pyg(types.SimpleNamespace(edge_index=ei, y=np.eye(12, 3)))
    with pytest.raises(ValueError, match="no edge_index"):
        D.from_pyg(types.SimpleNamespace(y=y))
    with pytest.raises(ValueError, match=r"names nodes outside \[0, 12\)"):
        D.from_pyg(types.SimpleNamespace(edge_index=np.array([[0, 12]]).T, y=y))
    with pytest.raises(ValueError, match=r"data.x holds NaN or inf in 1 row\(s\), e.g. nodes \[4\]"):
        bad = x.copy()
        bad[4, 1] = np.nan
        D.from_pyg(types.SimpleNamespace(edge_index=ei, y=y, x=bad))
    with pytest.raises(ValueError, match=r"has \['train_mask'\] but not all"):
        D.from_pyg(types.SimpleNamespace(edge_index=ei, y=y, train_mask=masks[0]))
    yu = y.copy()
    yu[masks[2][:, 0].argmax()] = -1
    with pytest.warns(UserWarning, match="1 of 12"):
        with pytest.raises(ValueError, match=r"masks hold 1 unlabelled node"):
            D.from_pyg(types.SimpleNamespace(edge_index=ei, y=yu, train_mask=masks[0], val_mask=masks[1],
                                             test_mask=masks[2]))
    with pytest.raises(ValueError, match="integer class ids"):
        D.from_pyg(types.SimpleNamespace(edge_index=ei, y=y + 0.5))
    yn = y.astype(np.float32)
    yn[[2, 5]] = np.nan  # a float y with NaN for missing labels: unlabelled nodes
    with pytest.warns(UserWarning, match="2 of 12"):
        assert D.from_pyg(types.SimpleNamespace(edge_index=ei, y=yn)).labels.tolist() == \
            [-1 if i in (2, 5) else v for i, v in enumerate(y.tolist())]
    with pytest.raises(ValueError, match="edge weights must be"):
        D.from_pyg(types.SimpleNamespace(edge_index=ei, y=y, edge_weight=-np.ones(ei.shape[1])))
