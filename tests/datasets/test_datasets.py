"""Tests of jaxclp.datasets: loaders vs the measured table of the shared data README, fetch/verify/cache,
splits and synthetic graphs. No network: files are fetched from ``file://<repo>/../shared/datasets``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from jaxclp import datasets as D
from jaxclp.datasets import registry as R

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
BASE_URL = SHARED.as_uri()

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared datasets not found at {SHARED}")

# Measured table of ../shared/datasets/README.md:
# name: (folder, nodes, E = unique undirected non-loop edges, E+loops, features, classes, edge homophily)
TABLE = {
    "texas": ("texas", 183, 279, 295, 1703, 5, 0.0609),
    "wisconsin": ("wisconsin", 251, 450, 466, 1703, 5, 0.1778),
    "cornell": ("cornell", 183, 277, 280, 1703, 5, 0.2960),
    "actor": ("film", 7600, 26659, 26752, 932, 5, 0.2167),
    "chameleon": ("chameleon", 2277, 31371, 31421, 2325, 5, 0.2299),
    "squirrel": ("squirrel", 5201, 198353, 198493, 2089, 5, 0.2221),
    "usa-airports": ("usa-airports", 1190, 13599, 13599, 0, 4, 0.6978),
    "brazil-airports": ("brazil-airports", 131, 1003, 1074, 0, 4, 0.4307),
    "europe-airports": ("europe-airports", 399, 5993, 5995, 0, 4, 0.4046),
    "wiki": ("wiki", 2405, 11596, 12761, 4973, 17, 0.6097),
    "acm": ("acm", 3025, 13128, 13128, 1870, 3, 0.8208),
    "dblp": ("dblp", 4057, 3528, 3528, 334, 4, 0.7988),
    "deezer-europe": ("deezer-europe", 28281, 92752, 92752, 31241, 2, 0.5251),
    "twitch-en": ("twitch/ENGB", 7126, 35324, 35324, 2545, 2, 0.5560),
    "twitch-ru": ("twitch/RU", 4385, 37304, 37304, 2224, 2, 0.6176),
    "minesweeper": ("minesweeper", 10000, 39402, 39402, 7, 2, 0.6828),
    "coauthor-cs": ("coauthor-cs", 18333, 81894, 81894, 6805, 15, 0.8081),
    "coauthor-physics": ("coauthor-physics", 34493, 247962, 247962, 8415, 5, 0.9314),
}
# features kept sparse (scipy CSR) by default: dense float32 form over 1 GiB
SPARSE_BY_DEFAULT = {"deezer-europe", "coauthor-physics", "coauthor-cs"}  # dense float32 over 256 MiB
# class counts given in the SOURCE.md files
CLASS_COUNTS = {
    "texas": [33, 1, 18, 101, 30], "wisconsin": [10, 70, 118, 32, 21], "actor": [853, 1337, 1630, 1815, 1965],
    "chameleon": [456, 460, 453, 521, 387], "squirrel": [1042, 1040, 1039, 1040, 1040],
    "usa-airports": [297, 297, 297, 299], "brazil-airports": [32, 32, 32, 35], "europe-airports": [99, 99, 99, 102],
    "acm": [1061, 965, 999], "dblp": [1197, 745, 1109, 1006], "deezer-europe": [15743, 12538],
    "twitch-en": [3238, 3888], "twitch-ru": [3310, 1075], "minesweeper": [8000, 2000],
    "coauthor-cs": [708, 462, 2050, 429, 1394, 2193, 371, 924, 775, 118, 1444, 2033, 420, 4136, 876],
    "coauthor-physics": [5750, 5045, 17426, 2753, 3519],
}
# published split sizes (train, val, test) of split 0
SPLIT_SIZES = {
    "texas": (87, 59, 37), "cornell": (87, 59, 37), "wisconsin": (120, 80, 51), "actor": (3648, 2432, 1520),
    "chameleon": (1092, 729, 456), "squirrel": (2496, 1664, 1041), "deezer-europe": (14140, 7070, 7071),
    "minesweeper": (5000, 2500, 2500),
}
# Homophily the CLP paper reports for these (labels misaligned by its loader) vs the true value.
PAPER_MISALIGNED = {"usa-airports": 0.251, "brazil-airports": 0.286, "europe-airports": 0.309, "wiki": 0.298}


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One data root for the module, filled through the fetch path from the file:// mirror."""
    return tmp_path_factory.mktemp("jaxclp_data")


@pytest.fixture(scope="module")
def loaded(root):
    """``loaded(name)``: the dataset loaded once per module from ``root`` (first call goes through fetch)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = D.load(name, root=root, base_url=BASE_URL)
        return cache[name]
    return get


def _copy_dataset_files(name, dest):
    for fs in R.get_spec(name).files.values():
        src = SHARED / fs.path
        if src.exists():
            (dest / fs.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / fs.path)


# ------------------------------------------------------------------------------------------ table checks
@needs_shared
@pytest.mark.parametrize("name", list(TABLE))
def test_matches_readme_table(name, loaded, root):
    folder, n, e, e_loops, f, c, h = TABLE[name]
    ds = loaded(name)
    assert isinstance(ds, D.Dataset) and ds.name == name
    assert ds.num_nodes == n
    assert ds.graph.num_edges == 2 * e  # undirected: both directions, deduplicated, no loops
    assert ds.graph.symmetric
    s, r = np.asarray(ds.graph.senders), np.asarray(ds.graph.receivers)
    assert not np.any(s == r)
    assert ds.num_undirected_edges == e
    assert ds.labels.dtype == np.int32 and ds.labels.shape == (n,)
    assert ds.num_classes == c and ds.labels.min() == 0 and ds.labels.max() == c - 1
    if f == 0:
        assert ds.features is None
    elif name in SPARSE_BY_DEFAULT:
        import scipy.sparse as sps
        assert sps.isspmatrix_csr(ds.features) and ds.features.dtype == np.float32
        assert ds.features.shape == (n, f)
        assert np.all(np.isfinite(ds.features.data))
    else:
        assert isinstance(ds.features, np.ndarray) and ds.features.dtype == np.float32
        assert ds.features.shape == (n, f)
        assert np.all(np.isfinite(ds.features))
    assert round(ds.edge_homophily(), 4) == pytest.approx(h, abs=1e-9)
    if name in CLASS_COUNTS:
        assert np.bincount(ds.labels).tolist() == CLASS_COUNTS[name]
    assert ds.metric == ("roc_auc" if name.startswith("twitch") or name == "minesweeper" else "accuracy")
    # the files were fetched into the root with the shared layout
    for fs in R.get_spec(name).files.values():
        assert fs.path.startswith(folder + "/")
        if not fs.optional:
            assert (root / fs.path).is_file()
    # E+loops column: keep the file's self-loops
    ds_loops = D.load(name, root=root, download=False, self_loops="keep")
    assert D.undirected_edges(ds_loops.graph).shape[1] == e
    s, r = np.asarray(ds_loops.graph.senders), np.asarray(ds_loops.graph.receivers)
    assert ds_loops.graph.num_edges == 2 * e + (e_loops - e)
    assert int(np.sum(s == r)) == e_loops - e


@needs_shared
@pytest.mark.parametrize("name", ["usa-airports", "brazil-airports", "europe-airports", "wiki"])
def test_explicit_id_mapping_gives_true_homophily(name, loaded):
    ds = loaded(name)
    h_true = TABLE[name][-1]
    assert round(ds.edge_homophily(), 4) == h_true
    assert abs(ds.edge_homophily() - PAPER_MISALIGNED[name]) > 0.09
    # Simulate the CLP loader: nodes numbered by first appearance in the edge file, labels kept in file order.
    spec = R.get_spec(name)
    edge_file = SHARED / spec.files["edges" if "edges" in spec.files else "graph"].path
    raw = np.array(edge_file.read_text().split(), dtype=np.int64).reshape(-1, 2)
    _, first = np.unique(raw.reshape(-1), return_index=True)
    order = raw.reshape(-1)[np.sort(first)]
    renum = {v: i for i, v in enumerate(order.tolist())}
    ei = np.vectorize(renum.get)(raw).T
    assert round(D.edge_homophily(ei, ds.labels), 3) == PAPER_MISALIGNED[name]


@needs_shared
def test_id_mapping_details(loaded):
    usa = loaded("usa-airports")
    assert usa.node_ids is not None and usa.node_ids.shape == (1190,)
    lab = dict(zip(usa.node_ids.tolist(), usa.labels.tolist()))
    assert lab[10241] == 1 and lab[10243] == 2  # first rows of labels-usa-airports.txt
    assert loaded("brazil-airports").node_ids is None  # ids are 0..n-1
    # film rows are not sorted by node id: node 4873 has features 521,92,111,77,770 and label 3 (first row)
    actor = loaded("actor")
    assert np.flatnonzero(actor.features[4873]).tolist() == [77, 92, 111, 521, 770]
    assert actor.labels[4873] == 3 and actor.labels[1216] == 3
    # twitch: node index = new_id, target rows are not in new_id order
    tw = loaded("twitch-en")
    assert tw.labels[2299] == 0 and tw.labels[153] == 1
    assert tw.node_ids[2299] == 73045350 and tw.node_ids[153] == 61573865
    feats = json.loads((SHARED / "twitch/ENGB/musae_ENGB_features.json").read_text())
    cols = np.asarray(tw.info["feature_ids"])
    assert sorted(cols[np.flatnonzero(tw.features[3032])].tolist()) == sorted(set(feats["3032"]))
    # wiki: labels 1..19 without 12 and 14, encoded in sorted order
    wiki = loaded("wiki")
    assert wiki.info["label_values"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 16, 17, 18, 19]
    group = np.loadtxt(SHARED / "wiki/group.txt", dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(wiki.info["label_values"])[wiki.labels[group[:, 0]]], group[:, 1])


@needs_shared
def test_cornell_features_and_labels_are_texas_as_published(loaded):
    """A quirk of the Geom-GCN release (also in GCNII's copy): cornell/out1_node_feature_label.txt is
    byte-identical to texas's; only the edge files differ. Feature-only methods (MLP, LINK aside) therefore
    score the same on both with the same splits, which is what results/table2 shows."""
    a = (SHARED / "texas/out1_node_feature_label.txt").read_bytes()
    b = (SHARED / "cornell/out1_node_feature_label.txt").read_bytes()
    assert a == b
    texas, cornell = loaded("texas"), loaded("cornell")
    np.testing.assert_array_equal(texas.labels, cornell.labels)
    dense = [f.toarray() if hasattr(f, "toarray") else np.asarray(f) for f in (texas.features, cornell.features)]
    np.testing.assert_array_equal(*dense)
    assert texas.num_undirected_edges != cornell.num_undirected_edges  # 279 vs 277: different graphs


@needs_shared
@pytest.mark.parametrize("name", list(SPLIT_SIZES))
def test_published_splits(name, loaded):
    ds = loaded(name)
    sp = D.published_splits(ds)
    n = ds.num_nodes
    assert sp.train.dtype == np.bool_ and sp.train.shape == sp.val.shape == sp.test.shape
    assert sp.train.shape[1] == n and sp.num_splits == {"deezer-europe": 5}.get(name, 10)
    total = sp.train.astype(int) + sp.val + sp.test
    assert np.all(total == 1)  # disjoint and covering
    assert tuple(sp.sizes()[0]) == SPLIT_SIZES[name]
    assert sp.seeds is None


@needs_shared
def test_chameleon_splits_equal_npz_masks(loaded):
    ds = loaded("chameleon")
    with np.load(SHARED / "chameleon/heterophilous-graphs/chameleon.npz") as z:
        np.testing.assert_array_equal(ds.splits.train, z["train_masks"])
        np.testing.assert_array_equal(ds.splits.test, z["test_masks"])
        np.testing.assert_array_equal(ds.features, z["node_features"])


@needs_shared
def test_no_published_splits_raises(loaded):
    with pytest.raises(ValueError, match="no published splits"):
        D.published_splits(loaded("wiki"))


@needs_shared
def test_graph_options(loaded, root):
    # texas: 325 directed lines (16 loops); actor: 33391 lines, 30019 unique directed pairs (122 loops)
    t = D.load("texas", root=root, download=False, directed=True, self_loops="keep")
    assert t.graph.num_edges == 325 and not t.graph.symmetric
    a = D.load("actor", root=root, download=False, directed=True, self_loops="keep")
    assert a.graph.num_edges == 30019
    a2 = D.load("actor", root=root, download=False, directed=True, self_loops="keep", deduplicate=False)
    assert a2.graph.num_edges == 33391
    a3 = D.load("actor", root=root, download=False, self_loops="add")
    assert a3.graph.num_edges == 2 * 26659 + 7600
    sp = D.load("texas", root=root, download=False, sparse_features=True)
    assert sp.features.shape == (183, 1703) and sp.features.nnz == np.count_nonzero(loaded("texas").features)


# ------------------------------------------------------------------------------- fetch / verify / cache
@needs_shared
@pytest.mark.parametrize("name", list(TABLE))
def test_second_load_uses_processed_cache(name, loaded, root, monkeypatch):
    first = loaded(name)
    spec = R.get_spec(name)

    def fail(*a, **k):
        raise AssertionError("raw files parsed again")

    monkeypatch.setitem(R.REGISTRY, spec.name, dataclasses.replace(spec, builder=fail))
    import builtins
    real_open = builtins.open
    raw_paths = {str(root / fs.path) for fs in spec.files.values()}

    def guarded_open(file, *a, **k):
        assert str(file) not in raw_paths, f"raw file {file} read on a cache hit"
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded_open)
    again = D.load(name, root=root, download=False)
    monkeypatch.undo()
    assert list(D.processed_dir().glob(f"{name}-*.npz"))  # in $JAXCLP_CACHE (conftest) ...
    assert not (root / "_processed").exists() and not list(root.glob("*.npz"))  # ... never in the data root
    np.testing.assert_array_equal(np.asarray(again.graph.senders), np.asarray(first.graph.senders))
    np.testing.assert_array_equal(np.asarray(again.graph.receivers), np.asarray(first.graph.receivers))
    np.testing.assert_array_equal(again.labels, first.labels)
    if first.features is None:
        assert again.features is None
    elif name in SPARSE_BY_DEFAULT:  # compare the CSR arrays (never densify 1-3.5 GB here)
        assert again.features.shape == first.features.shape
        for part in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(again.features, part), getattr(first.features, part))
    else:
        np.testing.assert_array_equal(again.features, first.features)
    if first.splits is not None:
        np.testing.assert_array_equal(again.splits.train, first.splits.train)


@needs_shared
def test_cache_survives_deleted_raw_files_and_rebuilds_when_damaged(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCLP_CACHE", str(tmp_path / "env-cache"))
    d1 = D.load("brazil-airports", root=tmp_path / "data", base_url=BASE_URL)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["brazil-airports"]  # no cache in the root
    shutil.rmtree(tmp_path / "data" / "brazil-airports")
    d2 = D.load("brazil-airports", root=tmp_path / "data", download=False)  # cache hit, no raw file needed
    np.testing.assert_array_equal(d1.labels, d2.labels)
    # an explicit cache directory is used instead of $JAXCLP_CACHE; entries are per data root
    d4 = D.load("brazil-airports", root=tmp_path / "other", base_url=BASE_URL, cache=tmp_path / "mine")
    (mine,) = (tmp_path / "mine").glob("brazil-airports-*.npz")
    np.testing.assert_array_equal(d4.labels, d1.labels)
    (cache,) = (tmp_path / "env-cache").glob("brazil-airports-*.npz")
    assert cache.name != mine.name
    cache.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="damaged processed cache"):
        d3 = D.load("brazil-airports", root=tmp_path / "data", base_url=BASE_URL)
    assert d3.num_undirected_edges == 1003
    assert np.load(cache)["labels"].shape == (131,)  # rewritten


@needs_shared
@pytest.mark.parametrize("how", ["truncate", "modify"])
def test_corrupted_download_raises_and_is_not_used(tmp_path, how, monkeypatch):
    monkeypatch.setenv("JAXCLP_CACHE", str(tmp_path / "cache"))
    mirror = tmp_path / "mirror"
    _copy_dataset_files("texas", mirror)
    bad = mirror / "texas/out1_graph_edges.txt"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2] if how == "truncate" else data.replace(b"56\t84", b"56\t85", 1))
    actual = hashlib.sha256(bad.read_bytes()).hexdigest()
    expected = R.FILES["texas/out1_graph_edges.txt"].sha256
    root = tmp_path / "root"
    with pytest.raises(ValueError) as exc:
        D.load("texas", root=root, base_url=mirror.as_uri())
    msg = str(exc.value)
    assert isinstance(exc.value, D.ChecksumError)
    assert "out1_graph_edges.txt" in msg and expected in msg and actual in msg
    target = root / "texas/out1_graph_edges.txt"
    assert not target.exists()  # never moved into place
    assert not list(target.parent.glob("*.part"))  # no temporary left behind
    assert not (tmp_path / "cache").exists()


@needs_shared
def test_corrupted_existing_file_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCLP_CACHE", str(tmp_path / "cache"))
    _copy_dataset_files("texas", tmp_path)
    split = tmp_path / "texas/splits/texas_split_0.6_0.2_3.npz"
    data = bytearray(split.read_bytes())
    data[100] ^= 0xFF
    split.write_bytes(bytes(data))
    for download in (False, True):
        with pytest.raises(D.ChecksumError, match=r"sha256 mismatch for .*texas_split_0\.6_0\.2_3\.npz.*expected "
                                                  + R.FILES["texas/splits/texas_split_0.6_0.2_3.npz"].sha256):
            D.load("texas", root=tmp_path, download=download, base_url=BASE_URL)
    assert split.exists() and bytes(data) == split.read_bytes()  # left for the user, not silently replaced
    assert not (tmp_path / "cache").exists()
    # verify_file / sha256sum directly
    fs = R.FILES["texas/out1_graph_edges.txt"]
    assert D.sha256sum(tmp_path / fs.path) == fs.sha256
    D.verify_file(tmp_path / fs.path, fs)


def test_download_false_with_empty_root(tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        D.load("cornell", root=tmp_path / "empty", download=False)
    msg = str(exc.value)
    assert str(tmp_path / "empty") in msg and "cornell/out1_graph_edges.txt" in msg and "download=True" in msg
    assert "https://raw.githubusercontent.com/graphdml-uiuc-jlu/geom-gcn/" in msg


def test_missing_mirror_file_raises_download_error(tmp_path):
    with pytest.raises(D.DownloadError, match="could not download"):
        D.load("texas", root=tmp_path / "r", base_url=(tmp_path / "nothing").as_uri())
    assert not list((tmp_path / "r").rglob("*.part"))


@needs_shared
def test_env_vars(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXCLP_DATA", str(tmp_path / "envroot"))
    monkeypatch.setenv("JAXCLP_DATA_URL", BASE_URL)
    ds = D.load("europe-airports")
    assert ds.num_nodes == 399 and (tmp_path / "envroot/europe-airports/europe-airports.edgelist").is_file()
    assert D.data_root() == tmp_path / "envroot"
    monkeypatch.delenv("JAXCLP_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and os.uname().sysname == "Linux":
        assert D.data_root() == tmp_path / "xdg" / "jaxclp"
    assert D.file_url(R.FILES["wiki/wiki.mat"]) == f"{BASE_URL}/wiki/wiki.mat"
    monkeypatch.delenv("JAXCLP_DATA_URL")
    assert D.file_url(R.FILES["wiki/wiki.mat"]).startswith("https://raw.githubusercontent.com/tempcode06/GAGE/")


def test_unknown_name_and_option():
    with pytest.raises(ValueError, match="unknown dataset 'cora'.*texas.*twitch-en"):
        D.load("cora")
    with pytest.raises(ValueError, match="unknown option"):
        D.load("texas", foo=1)
    with pytest.raises(ValueError, match="needs h="):
        D.load("syn-1")


def test_available_and_registry():
    names = D.available()
    expected = {"texas", "wisconsin", "cornell", "actor", "chameleon", "squirrel", "usa-airports",
                "brazil-airports", "europe-airports", "wiki", "acm", "dblp", "deezer-europe", "twitch-en",
                "twitch-ru", "twitch-de", "twitch-es", "twitch-fr", "twitch-ptbr", "twitch-tw", "minesweeper",
                "tolokers", "roman-empire", "amazon-ratings", "questions"}
    assert expected <= set(names)
    assert {"syn-1", "syn-2", "syn-3"} <= set(D.available(synthetic=True))
    assert R.canonical_name("film") == "actor" and R.canonical_name("Roman_Empire") == "roman-empire"
    assert R.canonical_name("twitch-ENGB") == "twitch-en"
    pinned = re.compile(r"^https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/.+")
    for name in names:
        for fs in R.get_spec(name).files.values():
            assert pinned.match(fs.url), fs.url
            assert fs.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", fs.sha256)
    assert R.FILES["roman-empire/roman_empire.npz"].url.endswith(
        "yandex-research/heterophilous-graphs/a431395582e929d88271309716bea4fe24ce6318/data/roman_empire.npz")
    assert R.FILES["twitch/DE/musae_DE_edges.csv"].url.endswith("data/twitch/DE/musae_DE_edges.csv")


@needs_shared
def test_registry_hashes_match_shared_files():
    n = 0
    for path, fs in R.FILES.items():
        p = SHARED / path
        if p.exists():
            assert fs.sha256 is not None, path
            assert D.sha256sum(p) == fs.sha256, path
            n += 1
        else:
            assert fs.sha256 is None, f"{path} has a hash but is not in the shared copy"
    assert n >= 90


# ------------------------------------------------------------------------------------ format generality
def _write_twitch(folder: Path, lang: str, rng):
    """A tiny fake MUSAE language (target rows shuffled, so row order != new_id)."""
    n = 30
    folder.mkdir(parents=True)
    edges = rng.integers(0, n, (60, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    (folder / f"musae_{lang}_edges.csv").write_text("from,to\n" + "".join(f"{u},{v}\n" for u, v in edges))
    mature = rng.integers(0, 2, n).astype(bool)
    rows = rng.permutation(n)
    (folder / f"musae_{lang}_target.csv").write_text("id,days,mature,views,partner,new_id\n" + "".join(
        f"{1000 + i},{i},{mature[i]},{i * 3},False,{i}\n" for i in rows))
    feats = {str(i): sorted(set(rng.integers(0, 3170, 4).tolist())) for i in range(n)}
    (folder / f"musae_{lang}_features.json").write_text(json.dumps(feats))
    return n, edges, mature, feats


def test_any_twitch_language_folder(tmp_path):
    rng = np.random.default_rng(0)
    mirror = tmp_path / "mirror"
    n, edges, mature, feats = _write_twitch(mirror / "twitch/DE", "DE", rng)
    with pytest.warns(UserWarning, match="no sha256 known"):
        ds = D.load("twitch-de", root=tmp_path / "root", base_url=mirror.as_uri())
    assert ds.num_nodes == n and ds.metric == "roc_auc"
    np.testing.assert_array_equal(ds.labels, mature.astype(np.int32))
    np.testing.assert_array_equal(ds.node_ids, 1000 + np.arange(n))
    assert ds.num_undirected_edges == D.undirected_edges(edges.T, n).shape[1]
    used = sorted({f for v in feats.values() for f in v})
    assert ds.features.shape == (n, len(used))
    g = D.load("twitch-de", root=tmp_path / "root", download=False, vocab="global")
    assert g.features.shape == (n, 3170)
    for i in (0, 7, 29):
        assert np.flatnonzero(g.features[i]).tolist() == feats[str(i)]


def test_any_heterophilous_npz(tmp_path):
    rng = np.random.default_rng(1)
    n = 50
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    masks = rng.random((3, n)) < 0.5
    for name, fname in [("roman-empire", "roman_empire"), ("questions", "questions")]:
        p = tmp_path / "mirror" / name / f"{fname}.npz"
        p.parent.mkdir(parents=True)
        np.savez(p, node_features=rng.random((n, 3)).astype(np.float32), node_labels=np.arange(n) % 4,
                 edges=edges, train_masks=masks, val_masks=~masks, test_masks=np.zeros_like(masks))
    with pytest.warns(UserWarning, match="no sha256"):
        ds = D.load("roman_empire", root=tmp_path / "root", base_url=(tmp_path / "mirror").as_uri())
    assert ds.name == "roman-empire" and ds.num_nodes == n and ds.num_classes == 4
    assert ds.num_undirected_edges == 5 and ds.splits.train.shape == (3, n) and ds.metric == "accuracy"
    with pytest.warns(UserWarning):
        assert D.load("questions", root=tmp_path / "root", base_url=(tmp_path / "mirror").as_uri()
                      ).metric == "roc_auc"
    bad = tmp_path / "bad.npz"
    np.savez(bad, node_features=np.zeros((3, 2)), edges=edges)
    with pytest.raises(ValueError, match="missing keys"):
        D.read_heterophilous_npz(bad)


@needs_shared
def test_deezer_features_fetched_by_default_and_sparse(tmp_path):
    # The published features file (31241 binary bag-of-artists columns; SOURCE.md counts) is fetched by default
    # and kept sparse (28281 x 31241 would be 3.5 GB dense).
    import scipy.sparse as sps

    root = tmp_path / "root"
    d1 = D.load("deezer-europe", root=root, base_url=BASE_URL, cache=tmp_path / "c")
    assert (root / "deezer-europe" / "deezer_europe_features.json").is_file()
    assert sps.isspmatrix_csr(d1.features) and d1.features.dtype == np.float32
    assert d1.features.shape == (28281, 31241) and d1.num_undirected_edges == 92752
    assert int((np.diff(d1.features.indptr) == 0).sum()) == 6159  # nodes with an empty feature list
    assert np.unique(d1.features.indices).size == 30978
    assert set(np.unique(d1.features.data).tolist()) == {1.0}
    x, kind = D.node_features(d1)
    assert kind == "given" and sps.isspmatrix_csr(x) and x.nnz == d1.features.nnz
    # Without the features file and with download=False the error names the missing file.
    bare = tmp_path / "bare" / "deezer-europe"
    bare.mkdir(parents=True)
    for f in ("deezer_europe_edges.csv", "deezer_europe_target.csv", "deezer-europe-splits.npy"):
        shutil.copy(root / "deezer-europe" / f, bare / f)
    with pytest.raises(FileNotFoundError, match="deezer_europe_features.json"):
        D.load("deezer-europe", root=bare.parent, download=False, cache=tmp_path / "c")


# ------------------------------------------------------------------------------------ Coauthor (Shchur npz)
@needs_shared
def test_coauthor_features_and_adjacency(loaded):
    import scipy.sparse as sps

    cs = loaded("coauthor-cs")
    # CSR by default: 0.5 GB as dense float32 is over DENSE_FEATURES_MAX_BYTES (256 MiB)
    assert sps.isspmatrix_csr(cs.features) and cs.features.shape == (18333, 6805)
    assert cs.features.nnz == 1092079  # SOURCE.md
    nz = cs.features.data
    # word counts (measured: 1..105; SOURCE.md's "counts 1..5" undercounts 27587 entries above 5)
    assert nz.min() == 1.0 and nz.max() == 105.0 and np.all(nz == np.round(nz)) and int((nz > 5).sum()) == 27587
    phy = loaded("coauthor-physics")
    assert sps.isspmatrix_csr(phy.features) and phy.features.nnz == 1137311
    assert phy.splits is None and phy.info["file_self_loops"].size == 0


def _shchur_arrays(rng, n=6, d=4):
    import scipy.sparse as sps

    adj = sps.csr_matrix(np.triu(rng.random((n, n)) < 0.5, 1).astype(np.float32))
    adj = (adj + adj.T).tocsr()
    attr = sps.csr_matrix((rng.random((n, d)) < 0.5).astype(np.float32))
    return dict(adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=np.array(adj.shape),
                attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr,
                attr_shape=np.array(attr.shape), labels=np.arange(n) % 3), adj, attr


def test_shchur_npz_reads_numeric_arrays_only(tmp_path):
    rng = np.random.default_rng(3)
    arrays, adj, attr = _shchur_arrays(rng)
    p = tmp_path / "g.npz"
    # object arrays (as in the published files' class_names) are present but never read
    np.savez(p, **arrays, class_names=np.array([{"a": 1}, None], dtype=object))
    raw = D.read_shchur_npz(p)
    dense = np.zeros((6, 6))
    dense[raw.edge_index[0], raw.edge_index[1]] = 1
    np.testing.assert_array_equal(dense, adj.toarray() != 0)
    np.testing.assert_array_equal(raw.features.toarray(), attr.toarray())
    np.testing.assert_array_equal(raw.labels, np.arange(6) % 3)
    assert raw.num_classes == 3


def test_shchur_npz_refuses_pickled_arrays_and_bad_keys(tmp_path):
    rng = np.random.default_rng(4)
    arrays, _, _ = _shchur_arrays(rng)
    p = tmp_path / "pickled.npz"
    np.savez(p, **{**arrays, "labels": np.array([0, 1, 2, 0, 1, "x"], dtype=object)})
    with pytest.raises(ValueError, match=r"pickled\.npz.*'labels' needs pickle"):
        D.read_shchur_npz(p)
    q = tmp_path / "nokeys.npz"
    np.savez(q, **{k: v for k, v in arrays.items() if k != "adj_indptr"})
    with pytest.raises(ValueError, match=r"nokeys\.npz.*missing keys \['adj_indptr'\]"):
        D.read_shchur_npz(q)
    r = tmp_path / "short.npz"
    np.savez(r, **{**arrays, "labels": np.arange(5)})
    with pytest.raises(ValueError, match=r"short\.npz: labels has 5 entries but the adjacency has 6 nodes"):
        D.read_shchur_npz(r)


def test_coauthor_registry_entries():
    for name, fname, sha in [("coauthor-cs", "ms_academic_cs", "933c7457"), ("coauthor-physics", "ms_academic_phy",
                                                                          "e4d68468")]:
        fs = R.get_spec(name).files["npz"]
        assert fs.url == ("https://raw.githubusercontent.com/shchur/gnn-benchmark/"
                          f"1e72912a0810cdf27ae54fd589a3b43358a2b161/data/npz/{fname}.npz")
        assert fs.sha256.startswith(sha) and not fs.optional
    assert R.canonical_name("Physics") == "coauthor-physics" and R.canonical_name("CS") == "coauthor-cs"


# --------------------------------------------------------------------------- features for featureless graphs
def _toy(edges, n, loops=()):
    from jaxclp.datasets._base import build_dataset

    ei = np.array(list(edges) + [(v, v) for v in loops], dtype=np.int64).T.reshape(2, -1)
    raw = D.RawData(edge_index=ei, num_nodes=n, labels=np.zeros(n, np.int32), num_classes=1)
    return build_dataset(raw, "toy", "accuracy")


def test_log_degree_is_networkx_convention():
    # 0-1 listed twice (both directions), 1-2, a self-loop on 2 (networkx counts it twice), node 3 isolated
    ds = _toy([(0, 1), (1, 0), (1, 2), (0, 1)], 4, loops=(2,))
    assert ds.graph.num_edges == 4  # loop dropped from the graph, but recorded
    np.testing.assert_array_equal(D.networkx_degree(ds), [1, 2, 3, 0])
    x, kind = D.node_features(ds)
    assert kind == "log-degree" and x.shape == (4, 1) and x.dtype == np.float32
    np.testing.assert_allclose(x[:, 0], np.log([2.0, 3.0, 4.0, 1.0]), rtol=1e-6)
    oh, kind = D.node_features(ds, "degree-onehot")
    assert kind == "degree-onehot"
    np.testing.assert_array_equal(oh, np.eye(4, dtype=np.float32)[[1, 2, 3, 0]])
    ident, kind = D.node_features(ds, "identity")
    np.testing.assert_array_equal(ident, np.eye(4))
    with pytest.raises(ValueError, match="has no node features"):
        D.node_features(ds, "given")
    with pytest.raises(ValueError, match="kind must be one of"):
        D.node_features(ds, "degree")


@needs_shared
def test_airports_log_degree_matches_networkx(loaded):
    nx = pytest.importorskip("networkx")
    from jaxclp.datasets.struc2vec import read_struc2vec

    for name in ("brazil-airports", "europe-airports"):
        ds = loaded(name)
        raw = read_struc2vec(SHARED / name / f"{name}.edgelist", SHARED / name / f"labels-{name}.txt")
        g = nx.Graph(raw.edge_index.T.tolist())  # the authors' loader: nx.Graph(edges), G.degree
        expected = np.log(np.array([g.degree[i] for i in range(ds.num_nodes)]) + 1.0)
        x, kind = D.node_features(ds)
        assert kind == "log-degree"
        np.testing.assert_allclose(x[:, 0], expected, rtol=1e-6)
    assert loaded("brazil-airports").info["file_self_loops"].size == 71


def test_large_sparse_features_stay_sparse():
    import scipy.sparse as sps
    from jaxclp.datasets._base import build_dataset

    n, d = 50, 40
    f = sps.random(n, d, density=0.1, format="csr", random_state=0, dtype=np.float32)
    raw = D.RawData(edge_index=np.zeros((2, 0), np.int64), num_nodes=n, labels=np.zeros(n, np.int32),
                    num_classes=1, features=f)
    assert isinstance(build_dataset(raw, "toy", "accuracy").features, np.ndarray)  # small: dense by default
    ds = build_dataset(raw, "toy", "accuracy", sparse_features=True)
    assert sps.isspmatrix_csr(ds.features)
    x, _ = D.node_features(ds, max_dense_bytes=4 * n * d - 1)  # over the limit: stays CSR
    assert sps.isspmatrix_csr(x) and x.dtype == np.float32
    np.testing.assert_array_equal(x.toarray(), f.toarray())
    x, _ = D.node_features(ds, max_dense_bytes=4 * n * d)  # within it: dense
    assert isinstance(x, np.ndarray)
    np.testing.assert_array_equal(x, f.toarray())
    big_i, _ = D.node_features(ds, "identity", max_dense_bytes=100)
    assert sps.isspmatrix_csr(big_i) and big_i.nnz == n


# -------------------------------------------------------------------------------- MUSAE duplicate target rows
def test_twitch_duplicate_rows_same_label_accepted_with_warning(tmp_path):
    rng = np.random.default_rng(5)
    n, edges, mature, feats = _write_twitch(tmp_path / "DE", "DE", rng)
    t = tmp_path / "DE" / "musae_DE_target.csv"
    lines = t.read_text().splitlines()
    row7 = next(ln for ln in lines[1:] if ln.endswith(",7"))
    t.write_text("\n".join(lines + [row7.replace("1007,", "1007,")]) + "\n")
    with pytest.warns(UserWarning, match=r"listed more than once with the same label, e\.g\. \[7\]"):
        raw = D.read_musae_twitch(tmp_path / "DE" / "musae_DE_edges.csv", t)
    assert raw.num_nodes == n
    np.testing.assert_array_equal(raw.labels, mature.astype(np.int32))


def test_twitch_conflicting_duplicates_refused(tmp_path):
    rng = np.random.default_rng(6)
    _write_twitch(tmp_path / "DE", "DE", rng)
    t = tmp_path / "DE" / "musae_DE_target.csv"
    lines = t.read_text().splitlines()
    row3 = next(ln for ln in lines[1:] if ln.endswith(",3"))
    flipped = row3.replace(",True,", ",@,").replace(",False,", ",True,").replace(",@,", ",False,")
    t.write_text("\n".join(lines + [flipped]) + "\n")
    with pytest.raises(ValueError, match=r"musae_DE_target\.csv: 1 node id\(s\) listed more than once with "
                                         r"different labels \(3: \[0, 1\]\)"):
        D.read_musae_twitch(tmp_path / "DE" / "musae_DE_edges.csv", t)


def test_deezer_duplicate_target_rows(tmp_path):
    e = tmp_path / "edges.csv"
    e.write_text("node_1,node_2\n0,1\n1,2\n")
    t = tmp_path / "target.csv"
    t.write_text("id,target\n0,1\n1,0\n2,1\n1,0\n")
    with pytest.warns(UserWarning, match="same label"):
        raw = D.read_feather_deezer(e, t)
    np.testing.assert_array_equal(raw.labels, [1, 0, 1])
    t.write_text("id,target\n0,1\n1,0\n2,1\n1,1\n2,0\n")
    with pytest.raises(ValueError, match=r"target\.csv: 2 node id\(s\).*1: \[0, 1\], 2: \[0, 1\]"):
        D.read_feather_deezer(e, t)


def test_struc2vec_mapping_ignores_edge_order_and_rejects_unknown_ids(tmp_path):
    lab = tmp_path / "labels.txt"
    lab.write_text("node label\n700 1\n500 0\n900 1\n")
    e = tmp_path / "g.edgelist"
    e.write_text("900 700\n500 900\n")
    raw = D.read_struc2vec(e, lab)
    np.testing.assert_array_equal(raw.node_ids, [700, 500, 900])  # index = row of the label file
    np.testing.assert_array_equal(raw.labels, [1, 0, 1])
    np.testing.assert_array_equal(raw.edge_index, [[2, 1], [0, 2]])
    assert D.edge_homophily(raw.edge_index, raw.labels) == 0.5
    e.write_text("900 700\n500 901\n")
    with pytest.raises(ValueError, match="901"):
        D.read_struc2vec(e, lab)


def test_malformed_text_raises(tmp_path):
    lab = tmp_path / "labels.txt"
    lab.write_text("0 1\n1 x\n")
    e = tmp_path / "g.edgelist"
    e.write_text("0 1\n")
    with pytest.raises(ValueError, match="labels.txt"):
        D.read_struc2vec(e, lab)
    lab.write_text("0 1\n1 0 5\n")
    with pytest.raises(ValueError, match="labels.txt"):
        D.read_struc2vec(e, lab)


# ---------------------------------------------------------------------------------------------- splits
@pytest.mark.parametrize("kind,fr", [("sparse", (0.05, 0.05)), ("medium", (0.1, 0.1)), ("dense", (0.48, 0.32)),
                                     ((0.3, 0.2), (0.3, 0.2))])
def test_random_splits(kind, fr):
    n = 1003
    sp = D.random_splits(n, kind, num_splits=7, seed=11)
    assert sp.train.shape == sp.val.shape == sp.test.shape == (7, n) and sp.train.dtype == np.bool_
    assert sp.seeds == list(range(11, 18))
    assert np.all(sp.train.astype(int) + sp.val + sp.test == 1)
    n_tr, n_va = round(fr[0] * n), round(fr[1] * n)
    assert np.all(sp.sizes() == [n_tr, n_va, n - n_tr - n_va])
    again = D.random_splits(n, kind, num_splits=7, seed=11)
    for a, b in zip(sp[3], again[3]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(sp.train[0], sp.train[1])  # different seed per split
    other = D.random_splits(n, kind, num_splits=7, seed=12)
    np.testing.assert_array_equal(other.train[0], sp.train[1])  # split i uses seed + i
    # exactly the documented procedure: uniform permutation, first n_train are train
    perm = np.random.default_rng(11).permutation(n)
    assert set(np.flatnonzero(sp.train[0])) == set(perm[:n_tr].tolist())
    tr, va, te = sp.indices(0)
    assert len(tr) == n_tr and len(va) == n_va and len(te) == n - n_tr - n_va


def test_random_splits_of_the_labelled_nodes():
    """``labelled``: only the labelled nodes are split, exactly as ``random_splits`` splits an index of their
    count (so the documented procedure holds on that index); all True is the unmasked split, bit for bit."""
    n = 503
    lab = np.random.default_rng(3).random(n) < 0.7
    idx = np.flatnonzero(lab)
    sp = D.random_splits(n, "medium", num_splits=4, seed=5, labelled=lab)
    sub = D.random_splits(idx.size, "medium", num_splits=4, seed=5)
    assert sp.train.shape == (4, n) and sp.seeds == [5, 6, 7, 8] and sp.name == sub.name
    for k in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(sp, k)[:, idx], getattr(sub, k))
        assert not getattr(sp, k)[:, ~lab].any()  # unlabelled nodes are in no mask
    np.testing.assert_array_equal(sp.sizes(), sub.sizes())
    assert np.all(sp.train.astype(int) + sp.val + sp.test == lab)
    full = D.random_splits(n, "medium", num_splits=4, seed=5)
    every = D.random_splits(n, "medium", num_splits=4, seed=5, labelled=np.ones(n, bool))
    for k in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(every, k), getattr(full, k))
    with pytest.raises(ValueError, match=r"labelled must be a \(503,\) bool mask"):
        D.random_splits(n, "medium", labelled=lab[:-1])
    with pytest.raises(ValueError, match="no node has a label"):
        D.random_splits(n, "medium", labelled=np.zeros(n, bool))


def test_holdout_split_uses_every_labelled_node():
    """Labelled nodes (label != -1) permuted by default_rng(seed); of each class the first round(f * m_c) in that
    order (at most m_c - 1) are validation, the rest training; then two classes on validation where possible."""
    labels = np.array([0, -1, 1, 1, -1, 0, 2, 2, 0, 1, -1, 2, 1, 1, 0])
    tr, va = D.holdout_split(labels, 0.4, seed=3)
    lab = labels != -1
    assert not (tr & va).any() and np.array_equal(tr | va, lab)
    perm = np.flatnonzero(lab)[np.random.default_rng(3).permutation(lab.sum())]  # the documented procedure
    want_val = set()
    for c, m_c in ((0, 4), (1, 5), (2, 3)):  # round(1.6) = 2, round(2.0) = 2, round(1.2) = 1, by hand
        want_val |= set([i for i in perm if labels[i] == c][:{0: 2, 1: 2, 2: 1}[c]])
    assert set(np.flatnonzero(va)) == want_val and va.sum() == 5
    assert all(tr[labels == c].any() for c in (0, 1, 2))
    t2, v2 = D.holdout_split(labels, 0.4, seed=3)
    assert np.array_equal(t2, tr) and np.array_equal(v2, va)
    _, v1 = D.holdout_split(labels, 0.01, 0)   # round(0.04) = 0 per class -> the first two of two classes
    assert v1.sum() == 2 and len(set(labels[v1])) == 2
    first = next(i for i in np.flatnonzero(lab)[np.random.default_rng(0).permutation(lab.sum())])
    assert v1[first]
    # a singleton class goes to training whatever the permutation says
    y = np.array([5, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    for seed in range(20):
        t, v = D.holdout_split(y, 0.5, seed)
        assert t[0] and v.sum() >= 1 and (t | v).all()
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="val_fraction must lie in"):
            D.holdout_split(labels, bad, 0)
    with pytest.raises(ValueError, match="1 labelled node"):
        D.holdout_split(np.array([-1, 0, -1]), 0.5, 0)
    with pytest.raises(ValueError, match="no validation node left"):
        D.holdout_split(np.array([0, 1]), 0.5, 0)  # each class has one node: both must train


def test_holdout_split_two_classes_on_validation():
    """With few labels a validation part of one class is common (2 of 8 nodes); another class's training node
    moves over whenever its class keeps a training node, and never otherwise."""
    y = np.array([0, 1] * 4 + [-1] * 4)
    for seed in range(30):
        t, v = D.holdout_split(y, 0.2, seed)
        assert set(y[v]) == {0, 1} and set(y[t]) == {0, 1} and v.sum() in (2, 3)
        assert np.array_equal(t | v, y != -1) and not (t & v).any()
    # hand case: 0.1 of each class rounds to none; the nodes moved are, in the permutation order of
    # default_rng(0), the first of a class that keeps two training nodes, then the first of another such class
    y = np.array([0, 0, 0, 1, 1, 2])
    perm = np.random.default_rng(0).permutation(6)
    t, v = D.holdout_split(y, 0.1, 0)
    first = next(i for i in perm if y[i] in (0, 1))  # class 2 has one node: it trains
    second = next(i for i in perm if y[i] in (0, 1) and y[i] != y[first])
    assert set(np.flatnonzero(v)) == {first, second} and set(y[t]) == {0, 1, 2}
    # labels are any integers (a user's codes), not only 0..C-1
    t, v = D.holdout_split(np.array([10**9, 10**9, 10**9, 7, 7, -1]), 0.2, 0)
    assert set(np.array([10**9, 10**9, 10**9, 7, 7, -1])[v]) == {10**9, 7}
    # impossible: the other classes have one labelled node each, which must train; validation stays one class
    t, v = D.holdout_split(np.array([0, 0, 0, 1, 2]), 0.2, 0)
    assert set(np.array([0, 0, 0, 1, 2])[v]) == {0} and t[3] and t[4]


def test_holdout_split_is_stratified_whatever_the_permutation():
    """Labels laid out as the permutation of the same seed orders them (minesweeper's mines are exactly
    default_rng(0).permutation(10000)[:2000]): an unstratified hold-out would put every node of class 1 on
    validation; stratified, each class gives round(0.2 * m_c) nodes to validation."""
    n = 1000
    y = np.zeros(n, int)
    y[np.random.default_rng(0).permutation(n)[:200]] = 1
    t, v = D.holdout_split(y, 0.2, 0)
    assert (y[v] == 1).sum() == 40 and (y[v] == 0).sum() == 160
    assert (y[t] == 1).sum() == 160 and (y[t] == 0).sum() == 640


def test_random_splits_not_class_balanced():
    labels = np.r_[np.zeros(900, int), np.ones(100, int)]
    counts = [np.bincount(labels[m], minlength=2)[1] for m in D.random_splits(1000, "medium", 20, 0).train]
    assert len(set(counts)) > 1  # per-class counts vary: uniform, not stratified


@pytest.mark.parametrize("text,name", [("60/20/20", "0.6/0.2/0.2"), ("0.6,0.2", "0.6/0.2/0.2"),
                                       ("5/5/90", "0.05/0.05/0.9"), ("medium", "medium"), ("published", "published")])
def test_parse_split(text, name):
    assert D.parse_split(text) == name
    if name not in ("medium", "published"):  # random_splits takes the canonical name: those rates, that name
        sp = D.random_splits(200, name, num_splits=2, seed=0)
        tr, va = (float(v) for v in name.split("/")[:2])
        assert sp.name == name and sp.sizes()[0].tolist() == [round(200 * tr), round(200 * va),
                                                              200 - round(200 * tr) - round(200 * va)]


def test_parse_split_errors():
    for bad, match in (("60/30/20", "must be 1"), ("0.7/0.4", "train \\+ val < 1"), ("0.6/0", "0 < val"),
                       ("x", "TRAIN/VAL"), ("1/2/3/4", "TRAIN/VAL")):
        with pytest.raises(ValueError, match=match):
            D.parse_split(bad)


def test_random_splits_errors():
    with pytest.raises(ValueError, match="unknown split kind"):
        D.random_splits(10, "huge")
    with pytest.raises(ValueError, match="fractions"):
        D.random_splits(10, (0.7, 0.4))
    with pytest.raises(ValueError):
        D.random_splits(0, "sparse")


# ------------------------------------------------------------------------------------------- synthetic
@pytest.mark.parametrize("h", [0.0, 0.1, 0.35, 0.8, 1.0])
@pytest.mark.parametrize("deg", [5, 10, 15])
def test_synthetic_homophily_degree_classes(h, deg):
    t = time.perf_counter()
    ds = D.synthetic(h, avg_degree=deg, seed=3)
    elapsed = time.perf_counter() - t
    n = 10000
    assert ds.num_nodes == n and ds.num_classes == 10
    assert np.bincount(ds.labels).tolist() == [1000] * 10
    assert abs(ds.edge_homophily() - h) < 0.02
    assert ds.num_undirected_edges == round(n * deg / 2)  # unique, loop-free
    deg_mean = np.bincount(np.asarray(ds.graph.receivers), minlength=n).mean()
    assert deg_mean == pytest.approx(deg, rel=1e-3)
    assert ds.graph.symmetric and not np.any(np.asarray(ds.graph.senders) == np.asarray(ds.graph.receivers))
    assert ds.features.shape == (n, 2) and ds.features.dtype == np.float32
    assert elapsed < 2.0  # typically ~0.1-0.3 s


def test_synthetic_gaussian_features():
    ds = D.synthetic(0.5, seed=0)
    x, y = ds.features.astype(np.float64), ds.labels
    for c in range(10):
        a = 2 * np.pi * c / 10
        rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        cov = rot @ np.diag([7.0, 2.0]) @ rot.T * 3500
        mean = x[y == c].mean(0)
        se = np.sqrt(np.diag(cov) / 1000)
        assert np.all(np.abs(mean - 300 * np.array([np.cos(a), np.sin(a)])) < 5 * se), (c, mean)
        emp = np.cov(x[y == c].T)
        assert np.allclose(emp, cov, atol=0.15 * cov[0, 0] + 0.15 * cov[1, 1])


def test_synthetic_seeded_and_configurable():
    a, b = D.synthetic(0.3, seed=5), D.synthetic(0.3, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(np.asarray(a.graph.senders), np.asarray(b.graph.senders))
    np.testing.assert_array_equal(a.features, b.features)
    c = D.synthetic(0.3, seed=6)
    assert not np.array_equal(a.features, c.features)
    small = D.synthetic(0.6, avg_degree=4, num_classes=3, nodes_per_class=50, features=None, seed=1)
    assert small.num_nodes == 150 and small.features is None and small.num_undirected_edges == 300
    assert abs(small.edge_homophily() - 0.6) < 1e-9
    s2 = D.load("syn-2", h=0.4, seed=1)
    assert s2.num_undirected_edges == 50000 and abs(s2.edge_homophily() - 0.4) < 1e-9
    with pytest.raises(ValueError, match="h must lie"):
        D.synthetic(1.5)
    with pytest.raises(ValueError, match="intra-class edges"):
        D.synthetic(1.0, avg_degree=10, num_classes=2, nodes_per_class=5)


def test_synthetic_features_from_real():
    rng = np.random.default_rng(0)
    real_labels = np.r_[np.zeros(300, int), np.ones(40, int), np.full(500, 2)]
    real_x = np.concatenate([np.eye(3)[real_labels] * 10, rng.random((840, 4))], axis=1).astype(np.float32)
    ds = D.synthetic(0.4, num_classes=5, nodes_per_class=100, features_from=(real_x, real_labels), seed=2)
    cmap = np.asarray(ds.info["class_map"])
    assert cmap.shape == (5,) and set(cmap[:3].tolist()) == {0, 1, 2}  # a permutation, then reused
    assert ds.features.shape == (500, 7)
    src_class = ds.features[:, :3].argmax(1)
    np.testing.assert_array_equal(src_class, cmap[ds.labels])  # every row comes from the mapped real class
    small = np.flatnonzero(cmap == 1)  # the real class with only 40 rows: drawn with replacement
    if small.size:
        rows = ds.features[ds.labels == small[0]]
        assert np.unique(rows, axis=0).shape[0] <= 40
    big = np.flatnonzero(cmap == 2)[0]  # 500 >= 100 rows: without replacement
    assert np.unique(ds.features[ds.labels == big], axis=0).shape[0] == 100
    same = D.synthetic(0.4, num_classes=5, nodes_per_class=100, features=(real_x, real_labels), seed=2)
    np.testing.assert_array_equal(same.features, ds.features)


def test_edge_homophily_helper():
    ei = np.array([[0, 1, 1, 2, 2], [1, 0, 2, 2, 3]])  # 0-1 twice (both directions), a loop at 2
    labels = np.array([0, 0, 1, 1])
    assert D.undirected_edges(ei, 4).tolist() == [[0, 1, 2], [1, 2, 3]]
    assert D.edge_homophily(ei, labels) == pytest.approx(2 / 3)


def test_every_table_dataset_solves_its_alphas_in_one_vmapped_call():
    """The solves' alpha chunks (jaxclp.solve.SOLVE_CHUNK_BYTES, SOLVE_CHUNK_MIN_SIZE) change float rounding, so
    they must not apply to the datasets behind the committed records: at every measured (n, K), clp's 11 alphas
    (float32) go in one call for each method "auto" picks and for the per-step L1 iteration."""
    import importlib

    import jax.numpy as jnp

    S = importlib.import_module("jaxclp.solve")
    for name, (_, n, *_, k, _) in TABLE.items():
        for method in ("neumann", "jacobi", "cg", "bicgstab", "iterate_l1"):
            assert S.alpha_chunk(method, (n, k), jnp.float32) >= 11, (name, method)
    assert S.alpha_chunk("cg", (50_000, 40), jnp.float32) == S.SOLVE_CHUNK_ALPHAS  # the benchmark's graph: capped


def test_integral_labels_name_fractions_and_inf_and_mark_nan():
    """The one check every array/folder reader (load_file's .npy, OGB, from_pyg) uses for labels and ids."""
    from jaxclp.datasets._base import integral

    ints, nan, bad = integral(np.array([1.0, np.nan, 2.5, np.inf, -1.0, 3.0]))
    assert nan.tolist() == [False, True, False, False, False, False]
    assert bad.tolist() == [False, False, True, True, False, False]
    assert ints[[0, 1, 4, 5]].tolist() == [1, -1, -1, 3] and ints.dtype == np.int64
    ints, nan, bad = integral(np.array([4, 0, 7], np.int32))
    assert ints.tolist() == [4, 0, 7] and not nan.any() and not bad.any()


def test_offline_download_error_names_the_mirror_variable_and_the_data_folder(tmp_path, monkeypatch):
    """Offline, a load said only "[Errno -3] Temporary failure in name resolution"; now the one message names the
    cause, the data folder, $JAXCLP_DATA_URL and where the file goes."""
    import socket
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError(socket.gaierror(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.delenv("JAXCLP_DATA_URL", raising=False)
    with pytest.raises(D.DownloadError) as exc:
        D.load("texas", root=tmp_path / "cache")
    msg = str(exc.value)
    assert "Temporary failure in name resolution. Offline or behind a firewall?" in msg
    assert f"Put the file at {tmp_path / 'cache' / 'texas'}" in msg and f"the data folder is {tmp_path / 'cache'};" in msg
    assert "set $JAXCLP_DATA_URL to a mirror" in msg and "$JAXCLP_DATA or root=" in msg
    assert not list((tmp_path / "cache").rglob("*.part"))
