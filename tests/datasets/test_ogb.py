"""jaxclp.datasets.ogb: OGB node-property folders (raw/*.csv.gz + split/<name>/), read as published."""

import gzip
import warnings

import numpy as np
import pytest

from jaxclp.experiments import cli, records
from jaxclp import datasets as D
from jaxclp.datasets.ogb import is_ogb_folder, read_ogb_folder


def _gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(rows).encode()))


def _ogb(root, n=40, k=3, nan_nodes=(), features=True, split=True, seed=0):
    """An OGB folder as OGB ships it (arxiv layout): directed edges, labels, optional features and one split."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    edges = rng.integers(0, n, (3 * n, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    x = rng.normal(size=(n, 4)).astype(np.float32)
    _gz(root / "raw" / "edge.csv.gz", [f"{u},{v}\n" for u, v in edges])
    _gz(root / "raw" / "num-node-list.csv.gz", [f"{n}\n"])
    _gz(root / "raw" / "node-label.csv.gz", ["nan\n" if i in nan_nodes else f"{y[i]}\n" for i in range(n)])
    if features:
        _gz(root / "raw" / "node-feat.csv.gz", [",".join(repr(float(v)) for v in r) + "\n" for r in x])
    parts = None
    if split:
        labelled = np.array([i for i in rng.permutation(n) if i not in nan_nodes])
        parts = np.array_split(labelled, [len(labelled) // 2, 3 * len(labelled) // 4])
        for name, idx in zip(("train", "valid", "test"), parts):
            _gz(root / "split" / "time" / f"{name}.csv.gz", [f"{i}\n" for i in idx])
    return edges, y, x, parts


def test_ogb_folder_reads_edges_labels_features_and_its_split(tmp_path):
    edges, y, x, parts = _ogb(tmp_path / "arxiv")
    for path in (tmp_path / "arxiv", tmp_path / "arxiv" / "raw"):  # the folder, or its raw/
        assert is_ogb_folder(path)
        ds = D.load_file(path, directed=True)
        assert ds.name == "arxiv" and ds.num_nodes == 40 and ds.num_classes == 3
        np.testing.assert_array_equal(ds.labels, y)
        np.testing.assert_allclose(ds.features, x, rtol=1e-7)
        pairs = set(zip(np.asarray(ds.graph.senders).tolist(), np.asarray(ds.graph.receivers).tolist()))
        assert pairs == set(map(tuple, edges.tolist()))  # directed: u -> v as listed
        for mask, idx in zip((ds.splits.train, ds.splits.val, ds.splits.test), parts):
            assert mask.shape == (1, 40)
            np.testing.assert_array_equal(np.flatnonzero(mask[0]), np.sort(idx))
    und = D.load_file(tmp_path / "arxiv")  # default: symmetrized
    pairs = set(map(tuple, edges.tolist()))
    assert und.graph.num_edges == len(pairs | {(v, u) for u, v in pairs})
    assert not is_ogb_folder(tmp_path) and not is_ogb_folder(tmp_path / "arxiv" / "split")


def test_ogb_nan_labels_are_unlabelled_and_out_of_the_split(tmp_path):
    _ogb(tmp_path / "g", nan_nodes=(3, 7))
    with pytest.warns(UserWarning, match="2 of 40 node"):
        ds = D.load_file(tmp_path / "g")
    assert (np.asarray(ds.labels)[[3, 7]] == -1).all() and (np.asarray(ds.labels) >= 0).sum() == 38
    # a split that lists an unlabelled node is ambiguous: refused, naming the file and node
    _gz(tmp_path / "g" / "split" / "time" / "test.csv.gz", ["3\n", "5\n"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"test\.csv\.gz: 1 node\(s\) without a label \(nan\), e\.g\. \[3\]"):
            D.load_file(tmp_path / "g")


def test_ogb_refusals_name_the_file(tmp_path):
    _ogb(tmp_path / "a", features=False)
    ds = D.load_file(tmp_path / "a")
    assert ds.features is None
    # labels= replaces the folder's labels (one label per line: nodes 0..n-1), with a warning saying so
    with pytest.warns(UserWarning, match=r"node-label\.csv\.gz: these labels replace the labels of .*ogb folder"):
        same = D.load_file(tmp_path / "a", labels=tmp_path / "a" / "raw" / "node-label.csv.gz")
    np.testing.assert_array_equal(same.labels, ds.labels)
    with pytest.raises(ValueError, match="an OGB folder holds its own features and edges"):
        D.load_file(tmp_path / "a", features=tmp_path / "a" / "raw" / "node-label.csv.gz")
    # multi-task labels (ogbn-proteins)
    _gz(tmp_path / "a" / "raw" / "node-label.csv.gz", ["0,1,0\n"] * 40)
    with pytest.raises(ValueError, match=r"node-label\.csv\.gz: 3 label columns \(multi-task"):
        D.load_file(tmp_path / "a")
    _gz(tmp_path / "a" / "raw" / "node-label.csv.gz", ["1.5\n"] + ["1\n"] * 39)
    with pytest.raises(ValueError, match=r"labels must be integers; rows \[1\] hold \[1\.5\]"):
        D.load_file(tmp_path / "a")
    _gz(tmp_path / "a" / "raw" / "node-label.csv.gz", ["1\n"] * 39 + ["inf\n"])  # not nan: not a missing label
    with pytest.raises(ValueError, match=r"labels must be integers; rows \[40\] hold \[inf\]"):
        D.load_file(tmp_path / "a")
    _gz(tmp_path / "a" / "raw" / "node-label.csv.gz", ["1\n"] * 39)
    with pytest.raises(ValueError, match="39 labels but the graph has 40 nodes"):
        D.load_file(tmp_path / "a")
    # edges out of range, overlapping parts, a pickled split
    _ogb(tmp_path / "b")
    _gz(tmp_path / "b" / "raw" / "edge.csv.gz", ["0,1\n", "1,40\n"])
    with pytest.raises(ValueError, match=r"edges name nodes outside \[0, 40\), e\.g\. edge row\(s\) \[2\]"):
        D.load_file(tmp_path / "b")
    _ogb(tmp_path / "c")
    _gz(tmp_path / "c" / "split" / "time" / "valid.csv.gz", ["0\n", "1\n", "2\n"])
    _gz(tmp_path / "c" / "split" / "time" / "train.csv.gz", ["2\n", "4\n"])
    with pytest.raises(ValueError, match=r"1 node\(s\) are in both train and valid, e\.g\. \[2\]"):
        D.load_file(tmp_path / "c")
    _ogb(tmp_path / "d", split=False)
    (tmp_path / "d" / "split" / "time").mkdir(parents=True)
    (tmp_path / "d" / "split" / "time" / "split_dict.pt").write_bytes(b"\x80\x04pickle")
    with pytest.raises(ValueError, match="split_dict.pt, a torch pickle, which jaxclp never unpickles"):
        D.load_file(tmp_path / "d")
    (tmp_path / "mag" / "raw" / "relations").mkdir(parents=True)
    with pytest.raises(ValueError, match="heterogeneous OGB folder"):
        D.load_file(tmp_path / "mag")
    with pytest.raises(ValueError, match="is a folder"):
        D.load_file(tmp_path / "d" / "split")


def test_ogb_several_split_schemes_warn_and_give_no_published_split(tmp_path):
    _ogb(tmp_path / "e")
    (tmp_path / "e" / "split" / "other").mkdir()
    with pytest.warns(UserWarning, match=r"several split schemes \['other', 'time'\]"):
        ds = D.load_file(tmp_path / "e")
    assert ds.splits is None


def test_ogb_binary_layout_equals_the_csv_one(tmp_path):
    """ogb.io.DatasetSaver's layout (ogbn-papers100M): raw/data.npz + raw/node-label.npz with NaN = unlabelled."""
    edges, y, x, parts = _ogb(tmp_path / "csv", nan_nodes=(5,))
    raw = tmp_path / "bin" / "raw"
    raw.mkdir(parents=True)
    np.savez_compressed(raw / "data.npz", edge_index=edges.T, num_nodes_list=np.array([40]), node_feat=x)
    yf = y.astype(np.float64)[:, None]
    yf[5] = np.nan
    np.savez_compressed(raw / "node-label.npz", node_label=yf)
    for name, idx in zip(("train", "valid", "test"), parts):
        _gz(tmp_path / "bin" / "split" / "time" / f"{name}.csv.gz", [f"{i}\n" for i in idx])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = read_ogb_folder(tmp_path / "csv"), read_ogb_folder(tmp_path / "bin")
    np.testing.assert_array_equal(a.edge_index, b.edge_index)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.labels[5] == -1 and a.num_nodes == b.num_nodes == 40
    np.testing.assert_allclose(a.features, b.features, rtol=1e-7)
    for ma, mb in zip(a.splits, b.splits):
        np.testing.assert_array_equal(ma, mb)


def test_cli_run_on_an_ogb_folder_with_its_published_split(tmp_path):
    _ogb(tmp_path / "toy")
    out = tmp_path / "out"
    assert cli.main(["run", "--graph", str(tmp_path / "toy"), "--split", "published", "--methods", "lp",
                     "--out", str(out), "--no-progress"]) == 0
    recs = [r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "result"]
    assert sorted((r["dataset"], r["run"], r["method"]) for r in recs) == [("toy", 0, "lp")]
    assert all(r["split"] == "published" for r in recs)
