"""Registry of datasets and their published files: relative path, canonical public URL, sha256.

The relative paths follow the layout of the shared copy (``<root>/texas/out1_graph_edges.txt``,
``<root>/twitch/ENGB/musae_ENGB_edges.csv``, ...). Canonical URLs are ``raw.githubusercontent.com`` URLs
pinned to the commits the files were taken from. ``sha256=None`` marks files whose hash is not known here
(their data was not available when this registry was written): they are downloaded but cannot be verified.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from jaxclp.datasets._base import RawData
from jaxclp.datasets.geom_gcn import read_geom_gcn
from jaxclp.datasets.heterophilous import read_heterophilous_npz
from jaxclp.datasets.musae import read_feather_deezer, read_musae_twitch
from jaxclp.datasets.sdcn import read_sdcn
from jaxclp.datasets.shchur import read_shchur_npz
from jaxclp.datasets.struc2vec import read_struc2vec
from jaxclp.datasets.tadw import read_tadw

__all__ = ["FileSpec", "DatasetSpec", "REGISTRY", "FILES", "ALIASES", "canonical_name", "get_spec"]

_RAW = "https://raw.githubusercontent.com"
GEOM_GCN = f"{_RAW}/graphdml-uiuc-jlu/geom-gcn/f1fc0d14b3b019c562737240d06ec83b07d16a8f"
HETERO = f"{_RAW}/yandex-research/heterophilous-graphs/a431395582e929d88271309716bea4fe24ce6318"
STRUC2VEC = f"{_RAW}/leoribeiro/struc2vec/77b4cc63e79a37b1496f340c7772d932038417ec"
TMLR_CLP = f"{_RAW}/zhiqiangzhongddu/TMLR-CLP/2f7901d5364e375710ff0a541372de4a58d49ffe"
GAGE = f"{_RAW}/tempcode06/GAGE/ec27faae1e6131dcc17ddd667beb3af3ee7f5559"
AMGCN = f"{_RAW}/zhumeiqiBUPT/AM-GCN/1ce29649f47a67e27b89337cc37eb67ba096308a"
AGCN = f"{_RAW}/ZhihaoPENG-CityU/MM21---AGCN/ca24f59797ca0fbe615a8d4aa1a34bbf38ef65bd"
ROZEMBERCZKI = f"{_RAW}/benedekrozemberczki/datasets/cc0c850c1c1e8893eae91e4750d0bd5b387c0170"
LINKX = f"{_RAW}/CUAI/Non-Homophily-Large-Scale/82f8f05c5c3ec16bd5b505cc7ad62ab5e09051e6"
SHCHUR = f"{_RAW}/shchur/gnn-benchmark/1e72912a0810cdf27ae54fd589a3b43358a2b161"

# sha256 of every file of the shared copy (byte-identical to the publishers' files).
SHA256: dict[str, str] = {
    "acm/ACM_graph.txt": "54529a64f7b2cd373b3cee450afec900bcf34de3dfb87fe436552efe48b15c87",
    "acm/ACM_label.txt": "a1637c25de4e946d027f131cc02a2f8cae268ac8488fc12fa22e9b275603ead3",
    "acm/acm.zip": "99166d12818748c33ebfe752e6f03ada78b3be3465e419141ea78d65bdccc3f4",
    "brazil-airports/brazil-airports.edgelist": "896b7bd460ad2da9160888d99bc9099ffe8ed7de3e410833889ea393831bcaa7",
    "brazil-airports/labels-brazil-airports.txt":
        "8f9d19f10192fbaeb91dfb46dd7eae0fef28bfe1272d41ab96a4494a0d06785f",
    "chameleon/heterophilous-graphs/chameleon.npz":
        "4c640bd2877fc4f9f101531e2f977bc16445a54e09a5cb01178df608e552f3fd",
    "chameleon/heterophilous-graphs/chameleon_filtered.npz":
        "bf46f07e1fb5249280447e5fe3100f3e82fc4b93ad1e13ffcfdec924b6ac0bb5",
    "chameleon/out1_graph_edges.txt": "45ac593de9207470090230c8fd76beeb2f60b5371a9be088e8bf31e7f0619a4b",
    "chameleon/splits/chameleon_split_0.6_0.2_0.npz": "36605525b69be4e7df5b31fe6a1d044288c6ebf9f9f0514ca151f6a36afc5e8b",
    "chameleon/splits/chameleon_split_0.6_0.2_1.npz": "d0779d5a1bedf1967d394468a52c0175fb00595d361fba897faf73322386c952",
    "chameleon/splits/chameleon_split_0.6_0.2_2.npz": "86ad0d827bf4301dff830598fc0b70d0dd8689c5b4d72dab1d87a6c1970c4c6e",
    "chameleon/splits/chameleon_split_0.6_0.2_3.npz": "37b3e994adf3afc55e16b617ed05af4e3ce308800755839084d77eced0528e9d",
    "chameleon/splits/chameleon_split_0.6_0.2_4.npz": "f6b1d067b2b330132839d8b6120077bdc6cf759f7ce421f881a02e2953ec4596",
    "chameleon/splits/chameleon_split_0.6_0.2_5.npz": "e7661834275c826692510cea0457b18b2c1ee38771f178d06e701b97541a1f6d",
    "chameleon/splits/chameleon_split_0.6_0.2_6.npz": "16648d1197c1d3a2dec385346212c382030b0d5a8c997f4255aa2afa68a6b174",
    "chameleon/splits/chameleon_split_0.6_0.2_7.npz": "61adcc53846becefecd466a5364dda23b983d387d1ac5d58c6e24d080c0fcba7",
    "chameleon/splits/chameleon_split_0.6_0.2_8.npz": "7076ad5341a8218b1f5b6eccf9cfd15d28286ea11ef5c06eeee77af24ff2bf63",
    "chameleon/splits/chameleon_split_0.6_0.2_9.npz": "743c4f813bf6130398a6511eb9ff07d2366c73bd6c7fddaf226a3f9e2917e0e7",
    "coauthor-cs/ms_academic_cs.npz": "933c745734e78908c7eb77172a673fee0503f30e26e5a99b36814d88534c42e3",
    "coauthor-physics/ms_academic_phy.npz": "e4d68468eba5fb8f6b280ffd406bd53e6e4295ba1dd2967d6fe99b978e4b3375",
    "cornell/out1_graph_edges.txt": "c4522a00cc40873c8a04a3a07c49e24a48a507eb284ac9c9f2d3e0590351bbb7",
    "cornell/out1_node_feature_label.txt": "cf5a3ca346cdd1210b8342e22517fcbbdae658065b7a3145f59350e50e6236a3",
    "cornell/splits/cornell_split_0.6_0.2_0.npz": "14022a1e19ec7fc0a07a2c06a785a2f9dc52809dbcd1c14fc318f7800675d73f",
    "cornell/splits/cornell_split_0.6_0.2_1.npz": "5568fa27e968a724c92211bf97026a36a08893cf94b218043e49b4c973c35cfb",
    "cornell/splits/cornell_split_0.6_0.2_2.npz": "763fc1f423395e4172617fa5b6bc0d7adad2241e5fedd1a4f0a098a67f9dc8e9",
    "cornell/splits/cornell_split_0.6_0.2_3.npz": "4334321cd9ec42de9d51107fb9a6dc310512e0921bc1cff0f390301ee37315fa",
    "cornell/splits/cornell_split_0.6_0.2_4.npz": "2b6b3ef396f4dc7fcdc276fb16b88bb87409b25879dd672b3a506eca844dd8d7",
    "cornell/splits/cornell_split_0.6_0.2_5.npz": "1a40ef8b20aa9e1aa850e1abdaba3efac1f66c98ef2c6a59eadefa21136ece6b",
    "cornell/splits/cornell_split_0.6_0.2_6.npz": "bcddf4ab59eae4c7d47b8a6cec9025a54ec0e6d3f3bdcd7678e201f25ace4642",
    "cornell/splits/cornell_split_0.6_0.2_7.npz": "2b497e12dfc123d7e7c9bb4fc4a82b5bee18409e109a3e3a04da439cacec964d",
    "cornell/splits/cornell_split_0.6_0.2_8.npz": "5c4e110d252d7ad156b2e4cd34b6dbd1cecbcc1755f8d72e932cc2a54f2b643c",
    "cornell/splits/cornell_split_0.6_0.2_9.npz": "80f1531807194d301affbf6f879a4ab4f56a19bdccb62d192e3ecd1b5275f052",
    "dblp/DBLP.mat": "87ba04f81566a42d5cec74344e52ed10db677e2704ded02e9981d770c7dcec31",
    "dblp/DBLP_graph.txt": "cadb495a8810b48866ee9a2c92b2b10a7137406476c94eb4ebee642f268df984",
    "dblp/DBLP_label.txt": "31c369e801d7c6891b2d7b31d4c1f2718d69aca498d23a8c48945061fcdc0da6",
    "deezer-europe/deezer-europe-splits.npy": "15dc2ccafca32dd89316334ad12bc47892383abb8f4edd76a90a70780c861c2f",
    "deezer-europe/deezer_europe_edges.csv": "a4aabf57e3eb20d40d5df7c7d15142b20656d9ca8f77a083106c1ee81226e530",
    "deezer-europe/deezer_europe_target.csv": "9d5c5736e1d55361e9caa5ae4f96ea5f40c3a70a8cfaad332defac9d84c6b2c6",
    "deezer-europe/deezer_europe_features.json":
        "8d2526372b903f45bf0d1bf6df33416769b99cbb38ba89cdac54848a3143b2db",
    "europe-airports/europe-airports.edgelist": "bd202178d0d1253c15bd3c9a22cc2a25f630244bbef9060bc30adbf0a5e130f6",
    "europe-airports/labels-europe-airports.txt":
        "92bace031cc02937ac9629d6c69387458e5d5016a7dab98490fbf33e392cec4e",
    "film/out1_graph_edges.txt": "997cdce67ea9c29257d3ffe796328391931901cf823830affa453178b60e2c3e",
    "film/out1_node_feature_label.txt": "1d5cdd094f8b91e770f6decfca85b35cf42f75d1efb51055fd6af16e11820ff8",
    "film/splits/film_split_0.6_0.2_0.npz": "4505a41d4e90abd94d1ec22571ce528b09ad7cf20d87f764aebd4177590767f5",
    "film/splits/film_split_0.6_0.2_1.npz": "1871b0d24e3977c41e378fd24acc8025b63f86b77739be77a5b558d1287f207d",
    "film/splits/film_split_0.6_0.2_2.npz": "d26680e911ef3ecc9fc2a26d90c9d35028c63aadd7a5aea774649d1496c282cb",
    "film/splits/film_split_0.6_0.2_3.npz": "6755ad5f6a0be8594b344af3d2261eed935b83b73c4d70136e1a7beea7f78cb0",
    "film/splits/film_split_0.6_0.2_4.npz": "328fdca62b25074f21f2922518e042f24b3b8a1fc378f9dfb2cae36439aed902",
    "film/splits/film_split_0.6_0.2_5.npz": "5b3161a8dc8de4b2e651ebd56d68e768d1377044895b325566117fe26ab81cb7",
    "film/splits/film_split_0.6_0.2_6.npz": "e251b38abd4d7931b5e9ae5aba99dcdf87f0be283bdf6e65421274a1c9ef1df6",
    "film/splits/film_split_0.6_0.2_7.npz": "12164ef9f5620a2f12a387f4f2b8636859d42201101d6d32829ade62d5a98326",
    "film/splits/film_split_0.6_0.2_8.npz": "405cd1f7f631f678119f8bf2405809e86614d532985beb59566fcf95abd35b3f",
    "film/splits/film_split_0.6_0.2_9.npz": "505691c5d41bb37b20d085415dcdde2e8e68b5bc4e1feb2c0e361308002012bb",
    "minesweeper/minesweeper.npz": "e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3",
    "squirrel/heterophilous-graphs/squirrel.npz": "d436e3b42c0546b105241c0ab0766097074e68e55f67b133eeb9b0162e55cbd9",
    "squirrel/heterophilous-graphs/squirrel_filtered.npz":
        "f06370ffb3116c5de8b7a600005400b2293c025e0ce2f6916d8201a825505ac7",
    "squirrel/out1_graph_edges.txt": "453d8e96754d68e2ab0a7ebb56f93506b59531d95abaec7a2b46fe1eae7c39cd",
    "squirrel/splits/squirrel_split_0.6_0.2_0.npz": "f112b88d3354e86d164d4d915b6a1f695c10f0e01e3e6b9893fc7b09bb93191d",
    "squirrel/splits/squirrel_split_0.6_0.2_1.npz": "2486c687c8befb55930a6237f76f1d86ce2ba345782eda6157f4e752d05f304f",
    "squirrel/splits/squirrel_split_0.6_0.2_2.npz": "d62ff83862ad96022d3400dfc9b7ca405834ca62767319d97c36b3f02db978c0",
    "squirrel/splits/squirrel_split_0.6_0.2_3.npz": "af3d90e0b2718ac7417e10e8b5b382443667412e846cabc3cc4e4a592f4cedae",
    "squirrel/splits/squirrel_split_0.6_0.2_4.npz": "fbe848298bb72b88db0704050cf216e2a93c916540d577906f3e644b679a6a2c",
    "squirrel/splits/squirrel_split_0.6_0.2_5.npz": "cd04fab46a181151ddd97ce93c65fe79558fb79ffa230b62f488ebfaf5fdcd75",
    "squirrel/splits/squirrel_split_0.6_0.2_6.npz": "b9189f7903ca7556a025c54dd5be6c00ec5952d4299e71630bc9876157676412",
    "squirrel/splits/squirrel_split_0.6_0.2_7.npz": "ea7fb3ca5d5aa45b917b99fb7d64d4e87322b2b5303a0156c547aa3f1a6c8941",
    "squirrel/splits/squirrel_split_0.6_0.2_8.npz": "b43faa190ca6dd4885a39dfc2a93d59f56f5174f3567bdbc49b18dd9cd9b7fb4",
    "squirrel/splits/squirrel_split_0.6_0.2_9.npz": "529ade4b86fd191908a96011f25c454653083674b6d4f090b3fdd27af2d14f62",
    "texas/out1_graph_edges.txt": "0fe85183243a78cbee9b85a684f8240963d04d1020d10e9cd2b8cfb25e33b476",
    "texas/out1_node_feature_label.txt": "cf5a3ca346cdd1210b8342e22517fcbbdae658065b7a3145f59350e50e6236a3",
    "texas/splits/texas_split_0.6_0.2_0.npz": "7ba77bf7a8856fcc0ab15623a611b8cdce994e820f577da914123fb4f45272b0",
    "texas/splits/texas_split_0.6_0.2_1.npz": "21cc244a96e3c51ad7993afb4dd227f90e467d82b964bb42d7d9fc500a6ef87f",
    "texas/splits/texas_split_0.6_0.2_2.npz": "b9e96a699ccf3a4c31ffbd03e52b25570889833425d20fa44e06c37b327cf61e",
    "texas/splits/texas_split_0.6_0.2_3.npz": "1a7deeb1285009789d5e6045d7e39f7d019c9223d9a75a2b7ce5e26d33b51f63",
    "texas/splits/texas_split_0.6_0.2_4.npz": "b5419ff3fe31adcae66fdb085d4f47d0b188e9436ab59f438632af969aafc674",
    "texas/splits/texas_split_0.6_0.2_5.npz": "68405fd1b9ff6105d99717220ecbd198785e338bf4a73abee722bbc9703d2667",
    "texas/splits/texas_split_0.6_0.2_6.npz": "8ad78b973164e70e5ac0d282e79adcbc6006e373909fbdfd72a13131e09040b8",
    "texas/splits/texas_split_0.6_0.2_7.npz": "a84bcbf997365bddf5fdf72ed49dc7e435e475f8c6210f8cdee7c8581a2bd6df",
    "texas/splits/texas_split_0.6_0.2_8.npz": "65ba65f296f91d40d2d7d3c9369b67415094a7e254c6eee48cd6d6531c586fdf",
    "texas/splits/texas_split_0.6_0.2_9.npz": "4306981d654ad8835c000c1f73fb6c1e60dfe99e26c13a6073f3b0f4cc3ce6ee",
    "twitch/ENGB/musae_ENGB_edges.csv": "5ea4d7f7267454e9523577eb2a9b4dcb7a22dd660a548240f01b815d08e0e3cc",
    "twitch/ENGB/musae_ENGB_features.json": "efcd846f7b687d299c9c674f3cda43cd70de8307d2558895bddd3645eb38d500",
    "twitch/ENGB/musae_ENGB_target.csv": "e9d51399878216d2dd662b0a152b602cccde7b5cbb8452cb91d9379f64114443",
    "twitch/RU/musae_RU_edges.csv": "fd307587a550289f746056ea12a7336171ab2053c9e08c42dba77499126ca5b2",
    "twitch/RU/musae_RU_features.json": "c5357468471545a6169de463ef706f321446dc667d9d62d49e68c0b3feef9675",
    "twitch/RU/musae_RU_target.csv": "db7617528355be994352e491e7b25d060fed466d0d81c09cadd90fa10f15c071",
    "usa-airports/labels-usa-airports.txt": "d4062ff3b3a67c3ae72b581bb68228433223e35d6f0b2d41844d197ad3772195",
    "usa-airports/usa-airports.edgelist": "c73fec3eef27ed6d6ef4d8dfa7fd1604b959601a38d399eeaa1f87e8d8d58fc0",
    "wiki/graph.txt": "3cdeb169eebca7bc59393da5b3aa030a3ccb7447379d10897df39fed7dde603a",
    "wiki/group.txt": "783708cb88bc7b785355a8cdefe9cdd94ad00171dda7d11328849b1a56d99f9e",
    "wiki/wiki.mat": "816ce9c745022a4f7e8dfc2b9e019979169250567b7d87fba5472c83fa9b7988",
    "wisconsin/out1_graph_edges.txt": "ebd213511c88fce1eda450c2f920600c4b8cbb38f02384856bcc47c6ec1807ae",
    "wisconsin/out1_node_feature_label.txt": "a32b0aa38d42f0d36841e8a8cb646d197f0ff33a182ac75a2b4476aeed3c7e4b",
    "wisconsin/splits/wisconsin_split_0.6_0.2_0.npz": "f66f641e191d35d491cd3b63d6c2cd93c4b436da398984b44c19a8d4d7e7b1a5",
    "wisconsin/splits/wisconsin_split_0.6_0.2_1.npz": "534aeb97266bd5a85a8587adf8eebad3f2e001c1240610f24b62c0ad0c2466ee",
    "wisconsin/splits/wisconsin_split_0.6_0.2_2.npz": "047a5b641778ec3a4c76055fd7f18ecb2424c0952f20dfff7e1b17749d8acbdd",
    "wisconsin/splits/wisconsin_split_0.6_0.2_3.npz": "706c27b4c51d046c0316f1e915f093e4a1fff48b3436b3e7c421eab596a99e77",
    "wisconsin/splits/wisconsin_split_0.6_0.2_4.npz": "7ee813605eec086457aaff022cf3837f2f893fcf8bd37e3a8d2ff0c80e4c4f87",
    "wisconsin/splits/wisconsin_split_0.6_0.2_5.npz": "8094ac2bdaf2cbea8f7a48df66a0800c809b2fd5942740e6b0441b660d3a0dd5",
    "wisconsin/splits/wisconsin_split_0.6_0.2_6.npz": "c423a8deea9b18f9ecb6cfd703578e2159df167de01fe7e6195b88995010252d",
    "wisconsin/splits/wisconsin_split_0.6_0.2_7.npz": "57ad808c8d4dd94dc4404124370bbcebb3dcc597c2bea6457bf05f220adf1527",
    "wisconsin/splits/wisconsin_split_0.6_0.2_8.npz": "27d4d62a2a6aea2cdc399302237512ab0d64fb0c84e648112f97c5896274e42f",
    "wisconsin/splits/wisconsin_split_0.6_0.2_9.npz": "3c149cd124a19021031609e0d7743a7be59aae4f88c8d38410138e8f06f5daaf",
}


@dataclasses.dataclass(frozen=True)
class FileSpec:
    """One published file.

    Attributes:
        path: path relative to the data root, e.g. ``"texas/out1_graph_edges.txt"``.
        url: canonical public URL (pinned commit).
        sha256: expected sha256 hex digest, or None if unknown (downloaded unverified, with a warning).
        optional: the dataset loads without it; used only when present (or with ``include_optional``).
    """

    path: str
    url: str
    sha256: str | None = None
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset.

    Attributes:
        name: canonical name.
        files: role -> :class:`FileSpec` (roles are the keyword names the builder receives).
        builder: ``builder(paths: dict[role, Path | None], **options) -> RawData``.
        metric: ``"accuracy"`` or ``"roc_auc"``.
        description: one line.
        options: builder keyword options with their defaults (they are part of the processed-cache key).
    """

    name: str
    files: Mapping[str, FileSpec]
    builder: Callable[..., RawData]
    metric: str = "accuracy"
    description: str = ""
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _f(path: str, url: str, optional: bool = False) -> FileSpec:
    return FileSpec(path=path, url=url, sha256=SHA256.get(path), optional=optional)


# ----------------------------------------------------------------------------------------------- builders
def _split_roles(paths):
    return [paths[k] for k in sorted((k for k in paths if k.startswith("split")), key=lambda k: int(k[5:]))]


def _build_geom_gcn(paths):
    return read_geom_gcn(paths["edges"], paths["nodes"], _split_roles(paths))


def _build_geom_gcn_wiki(paths):
    """Chameleon/Squirrel: Geom-GCN edges + splits, features and labels from the heterophilous npz."""
    npz = read_heterophilous_npz(paths["npz"])
    return read_geom_gcn(paths["edges"], None, _split_roles(paths), node_data=(npz.features, npz.labels))


def _build_heterophilous(paths):
    return read_heterophilous_npz(paths["npz"])


def _build_struc2vec(paths):
    return read_struc2vec(paths["edges"], paths["labels"])


def _build_tadw(paths):
    return read_tadw(paths["graph"], paths["group"], paths.get("features"))


def _build_sdcn(paths):
    return read_sdcn(paths["graph"], paths["labels"], paths.get("features"))


def _build_shchur(paths):
    return read_shchur_npz(paths["npz"])


def _build_twitch(paths, vocab="used"):
    return read_musae_twitch(paths["edges"], paths["target"], paths.get("features"), vocab=vocab)


def _build_deezer(paths, vocab="global"):
    return read_feather_deezer(paths["edges"], paths["target"], paths.get("features"), paths.get("splits"),
                               vocab=vocab)


# ----------------------------------------------------------------------------------------------- registry
REGISTRY: dict[str, DatasetSpec] = {}


def _register(spec: DatasetSpec) -> None:
    REGISTRY[spec.name] = spec


def _geom_gcn_files(folder: str, with_nodes: bool = True) -> dict[str, FileSpec]:
    files = {"edges": _f(f"{folder}/out1_graph_edges.txt", f"{GEOM_GCN}/new_data/{folder}/out1_graph_edges.txt")}
    if with_nodes:
        files["nodes"] = _f(f"{folder}/out1_node_feature_label.txt",
                            f"{GEOM_GCN}/new_data/{folder}/out1_node_feature_label.txt")
    for i in range(10):
        fn = f"{folder}_split_0.6_0.2_{i}.npz"
        files[f"split{i}"] = _f(f"{folder}/splits/{fn}", f"{GEOM_GCN}/splits/{fn}")
    return files


for _name, _folder, _desc in [
    ("texas", "texas", "WebKB Texas (Geom-GCN)"),
    ("wisconsin", "wisconsin", "WebKB Wisconsin (Geom-GCN)"),
    ("cornell", "cornell", "WebKB Cornell (Geom-GCN)"),
    ("actor", "film", "Actor co-occurrence network (Geom-GCN 'film')"),
]:
    _register(DatasetSpec(_name, _geom_gcn_files(_folder), _build_geom_gcn, "accuracy", _desc))

for _name in ("chameleon", "squirrel"):
    _files = _geom_gcn_files(_name, with_nodes=False)
    _files["npz"] = _f(f"{_name}/heterophilous-graphs/{_name}.npz", f"{HETERO}/data/{_name}.npz")
    _register(DatasetSpec(_name, _files, _build_geom_gcn_wiki, "accuracy",
                          f"Wikipedia {_name} (Geom-GCN edges and splits; features/labels from the "
                          "heterophilous-graphs npz)"))
    _register(DatasetSpec(
        f"{_name}-filtered",
        {"npz": _f(f"{_name}/heterophilous-graphs/{_name}_filtered.npz", f"{HETERO}/data/{_name}_filtered.npz")},
        _build_heterophilous, "accuracy", f"Wikipedia {_name} with duplicate nodes removed (Platonov et al.)"))

for _name, _file, _metric in [
    ("minesweeper", "minesweeper", "roc_auc"),
    ("tolokers", "tolokers", "roc_auc"),
    ("roman-empire", "roman_empire", "accuracy"),
    ("amazon-ratings", "amazon_ratings", "accuracy"),
    ("questions", "questions", "roc_auc"),
]:
    _register(DatasetSpec(_name, {"npz": _f(f"{_name}/{_file}.npz", f"{HETERO}/data/{_file}.npz")},
                          _build_heterophilous, _metric, f"heterophilous-graphs {_file} (Platonov et al.)"))

for _name in ("usa-airports", "brazil-airports", "europe-airports"):
    _register(DatasetSpec(_name, {
        "edges": _f(f"{_name}/{_name}.edgelist", f"{STRUC2VEC}/graph/{_name}.edgelist"),
        "labels": _f(f"{_name}/labels-{_name}.txt", f"{STRUC2VEC}/graph/labels-{_name}.txt"),
    }, _build_struc2vec, "accuracy", f"struc2vec {_name} air-traffic network (no features)"))

_register(DatasetSpec("wiki", {
    "graph": _f("wiki/graph.txt", f"{TMLR_CLP}/data/others/Wiki/graph.txt"),
    "group": _f("wiki/group.txt", f"{TMLR_CLP}/data/others/Wiki/group.txt"),
    "features": _f("wiki/wiki.mat", f"{GAGE}/data/wiki.mat"),
}, _build_tadw, "accuracy", "TADW Wiki document network (features from GAGE wiki.mat)"))

_register(DatasetSpec("acm", {
    "graph": _f("acm/ACM_graph.txt", f"{TMLR_CLP}/data/others/ACM/ACM_graph.txt"),
    "labels": _f("acm/ACM_label.txt", f"{TMLR_CLP}/data/others/ACM/ACM_label.txt"),
    "features": _f("acm/acm.zip", f"{AMGCN}/data/acm.zip"),
}, _build_sdcn, "accuracy", "ACM paper network (SDCN; features from AM-GCN acm.zip)"))

_register(DatasetSpec("dblp", {
    "graph": _f("dblp/DBLP_graph.txt", f"{TMLR_CLP}/data/others/DBLP/DBLP_graph.txt"),
    "labels": _f("dblp/DBLP_label.txt", f"{TMLR_CLP}/data/others/DBLP/DBLP_label.txt"),
    "features": _f("dblp/DBLP.mat", f"{AGCN}/data/DBLP.mat"),
}, _build_sdcn, "accuracy", "DBLP author network (SDCN; features from AGCN DBLP.mat)"))

_register(DatasetSpec("deezer-europe", {
    "edges": _f("deezer-europe/deezer_europe_edges.csv", f"{ROZEMBERCZKI}/deezer_europe/deezer_europe_edges.csv"),
    "target": _f("deezer-europe/deezer_europe_target.csv", f"{ROZEMBERCZKI}/deezer_europe/deezer_europe_target.csv"),
    "splits": _f("deezer-europe/deezer-europe-splits.npy", f"{LINKX}/data/splits/deezer-europe-splits.npy"),
    "features": _f("deezer-europe/deezer_europe_features.json",
                   f"{ROZEMBERCZKI}/deezer_europe/deezer_europe_features.json"),
}, _build_deezer, "accuracy", "deezer-europe (FEATHER): 31241 binary bag-of-artists features (sparse), LINKX "
    "splits", options={"vocab": "global"}))

for _name, _file, _desc in [("coauthor-cs", "ms_academic_cs", "Coauthor CS (Shchur et al.; 6805 bag-of-words)"),
                            ("coauthor-physics", "ms_academic_phy",
                             "Coauthor Physics (Shchur et al.; 8415 bag-of-words)")]:
    _register(DatasetSpec(_name, {"npz": _f(f"{_name}/{_file}.npz", f"{SHCHUR}/data/npz/{_file}.npz")},
                          _build_shchur, "accuracy", _desc))

TWITCH_NAMES = {"de": "DE", "en": "ENGB", "es": "ES", "fr": "FR", "ptbr": "PTBR", "ru": "RU", "tw": "TW"}
for _short, _lang in TWITCH_NAMES.items():
    _register(DatasetSpec(f"twitch-{_short}", {
        role: _f(f"twitch/{_lang}/musae_{_lang}_{suffix}", f"{LINKX}/data/twitch/{_lang}/musae_{_lang}_{suffix}")
        for role, suffix in (("edges", "edges.csv"), ("target", "target.csv"), ("features", "features.json"))
    }, _build_twitch, "roc_auc", f"MUSAE Twitch {_lang} gamer network", options={"vocab": "used"}))

ALIASES = {"film": "actor", "twitch-engb": "twitch-en", "twitch-pt": "twitch-ptbr",
           "twitch-english": "twitch-en", "twitch-russian": "twitch-ru", "deezer": "deezer-europe",
           "usa": "usa-airports", "brazil": "brazil-airports", "europe": "europe-airports",
           "cs": "coauthor-cs", "physics": "coauthor-physics", "coauthor-phy": "coauthor-physics",
           "ms-academic-cs": "coauthor-cs", "ms-academic-phy": "coauthor-physics"}

FILES: dict[str, FileSpec] = {fs.path: fs for spec in REGISTRY.values() for fs in spec.files.values()}


def canonical_name(name: str) -> str:
    """Normalizes a dataset name (case, ``_`` -> ``-``, aliases such as ``film`` -> ``actor``)."""
    key = str(name).strip().lower().replace("_", "-")
    return ALIASES.get(key, key)


def get_spec(name: str) -> DatasetSpec:
    """Returns the :class:`DatasetSpec` of ``name``.

    Raises:
        ValueError: unknown name (the message lists the valid names).
    """
    key = canonical_name(name)
    if key not in REGISTRY:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(REGISTRY))} "
                         "(and synthetic 'syn-1', 'syn-2', 'syn-3' with h=...)")
    return REGISTRY[key]
