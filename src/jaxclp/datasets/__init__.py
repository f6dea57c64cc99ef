"""Data layer of jaxclp: published benchmark datasets, splits and synthetic graphs.

Quick start::

    from jaxclp import datasets
    ds = datasets.load("texas")                 # Dataset(graph, features, labels, splits, metric, ...)
    sp = datasets.random_splits(ds.num_nodes, "sparse", num_splits=10, seed=0)
    syn = datasets.synthetic(h=0.3, avg_degree=5)
    mine = datasets.load_file("graph.csv", labels="labels.csv")   # any user's graph (also .npz layouts, OGB folders)
    x, kind = datasets.node_features(ds)        # own features, or log(degree + 1) for featureless graphs

Files are stored under ``root`` (``$JAXCLP_DATA`` or the user cache directory) with the layout of the registry
(:data:`REGISTRY`, :data:`FILES`), fetched from their canonical URLs (or ``base_url``/``$JAXCLP_DATA_URL``),
sha256-verified, and parsed once into the processed cache (``$JAXCLP_CACHE``, default
``<user cache dir>/_processed``).

Node ids are always mapped to indices explicitly (from the node/label file), never by order of appearance in
an edge list.
"""

from jaxclp.datasets._base import Dataset, RawData, edge_homophily, undirected_edges
from jaxclp.datasets.core import available, load
from jaxclp.datasets.fetch import (ChecksumError, DownloadError, data_root, fetch, fetch_file, file_url,
                                   processed_dir, sha256sum, verify_file)
from jaxclp.datasets.featurize import FEATURE_KINDS, networkx_degree, node_features
from jaxclp.datasets.files import load_file
from jaxclp.datasets.geom_gcn import read_geom_gcn
from jaxclp.datasets.heterophilous import read_heterophilous_npz
from jaxclp.datasets.musae import read_feather_deezer, read_musae_twitch
from jaxclp.datasets.ogb import read_ogb_folder
from jaxclp.datasets.pyg import from_pyg
from jaxclp.datasets.registry import ALIASES, FILES, REGISTRY, DatasetSpec, FileSpec, get_spec
from jaxclp.datasets.sdcn import read_sdcn
from jaxclp.datasets.shchur import read_shchur_npz
from jaxclp.datasets.splits import SPLIT_KINDS, Splits, holdout_split, parse_split, published_splits, random_splits
from jaxclp.datasets.struc2vec import read_struc2vec
from jaxclp.datasets.synthetic import SYNTHETIC_DEGREES, gaussian_features, sample_edges, synthetic
from jaxclp.datasets.tadw import read_tadw

__all__ = [
    "Dataset", "RawData", "Splits", "load", "available", "random_splits", "published_splits", "holdout_split",
    "parse_split",
    "synthetic",
    "sample_edges", "gaussian_features", "edge_homophily", "undirected_edges", "REGISTRY", "FILES", "ALIASES",
    "DatasetSpec", "FileSpec", "get_spec", "fetch", "fetch_file", "file_url", "data_root", "processed_dir",
    "sha256sum",
    "verify_file", "ChecksumError", "DownloadError", "SPLIT_KINDS", "SYNTHETIC_DEGREES", "read_geom_gcn",
    "read_heterophilous_npz", "read_struc2vec", "read_tadw", "read_sdcn", "read_musae_twitch",
    "read_feather_deezer", "read_shchur_npz", "read_ogb_folder", "from_pyg", "load_file", "node_features",
    "networkx_degree",
    "FEATURE_KINDS",
]
