"""Explanations and warm updates on a :class:`jaxclp.ShardedGraph` (through the graph protocol): complete, and equal
to the plain graph's."""

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

import jaxclp
import reference as ref
from jaxclp import Graph, estimate_compatibility
from jaxclp.explain import explain
from jaxclp.update import update_beliefs
from reference import host_devices_env

REPO = Path(__file__).resolve().parents[2]
N, K = 40, 3
NODES = [0, 5, 17, 33]


@functools.lru_cache(maxsize=None)
def problem():
    ei, kw = ref.graph_spec("undirected_loops", seed=7, n=N)
    g = Graph.from_edge_index(ei, N, **kw)
    prior, labels, mask = ref.random_problem(np.random.default_rng(3), N, K)
    h, _ = estimate_compatibility(g, prior, labels, mask)
    # one device, nodes renumbered (rcm): the internal order differs from the user's
    sg = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()[:1]), ("nodes",)), "nodes", partition="rcm")
    return g, sg, prior, labels, mask, np.asarray(h)


ROW_B0 = dict(prior_source="b0", normalization="row")


@pytest.mark.parametrize("method, options", [(m, {}) for m in ("neumann", "jacobi", "bicgstab", "cg")]
                         + [(m, ROW_B0) for m in ("neumann", "jacobi", "bicgstab")])  # cg: "row" is not symmetric
def test_sharded_explanation_is_complete_and_equals_the_plain_one(method, options):
    g, sg, prior, labels, mask, h = problem()
    assert not np.array_equal(np.asarray(sg.rank), np.arange(N))  # a real renumbering
    plain = explain(g, prior, labels, mask, h, 0.8, NODES, method=method, tol=1e-11, **options)
    shard = explain(sg, prior, labels, mask, h, 0.8, NODES, method=method, tol=1e-11, **options)
    c = np.asarray(shard.contributions)
    assert c.shape == (len(NODES), N, K) and shard.method == method
    np.testing.assert_allclose(c, np.asarray(plain.contributions), atol=1e-10)
    np.testing.assert_allclose(np.asarray(shard.scores), np.asarray(plain.scores), atol=1e-10)
    np.testing.assert_allclose(c.sum(axis=1), np.asarray(shard.scores), atol=1e-9)  # completeness
    assert np.asarray(shard.completeness).max() < 1e-9 and bool(np.all(shard.converged))
    # and the dense numpy inverse: (1 - a) [(I - a A^F_k)^{-1}]_{ij} D_jk
    b0 = ref.initial_beliefs(prior, labels, mask)
    ops = ref.clp_operators(ref.normalize(ref.graph_dense(g), options.get("normalization", "sym")), b0, h)
    d = prior if options.get("prior_source", "mlp") == "mlp" else b0
    inv = np.stack([np.linalg.inv(np.eye(N) - 0.8 * ops[k]) for k in range(K)])
    np.testing.assert_allclose(c, 0.2 * np.transpose(inv[:, NODES, :], (1, 2, 0)) * d[None], atol=1e-9)


def test_sharded_edge_list_methods_are_refused():
    _, sg, prior, labels, mask, h = problem()
    with pytest.raises(ValueError, match="needs the graph's edge list"):
        explain(sg, prior, labels, mask, h, 0.8, NODES, method="dense")


@pytest.mark.parametrize("method", ["neumann", "cg"])
def test_sharded_warm_update_equals_the_plain_one(method):
    g, sg, prior, labels, mask, h = problem()
    new = mask.copy()
    new[np.flatnonzero(~mask)[:4]] = True
    before = ref.closed_form(ref.clp_operators(ref.normalize(ref.graph_dense(g), "sym"),
                                               ref.initial_beliefs(prior, labels, mask), h), prior, 0.8)
    plain = update_beliefs(g, prior, labels, new, h, 0.8, before, method=method, tol=1e-11)
    shard = update_beliefs(sg, prior, labels, new, h, 0.8, before, method=method, tol=1e-11, cold=True)
    dense = ref.closed_form(ref.clp_operators(ref.normalize(ref.graph_dense(g), "sym"),
                                              ref.initial_beliefs(prior, labels, new), h), prior, 0.8)
    np.testing.assert_allclose(np.asarray(shard.beliefs), dense, atol=1e-9)
    np.testing.assert_allclose(np.asarray(shard.beliefs), np.asarray(plain.beliefs), atol=1e-9)
    np.testing.assert_allclose(np.asarray(shard.cold.value), dense, atol=1e-9)
    assert shard.beliefs.shape == (N, K)


SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    import jax
    jax.config.update("jax_enable_x64", True)
    import sys
    sys.path.insert(0, "tests")
    import numpy as np, jaxclp
    from jax.sharding import Mesh
    import reference as ref
    from jaxclp.explain import explain
    from jaxclp.update import update_beliefs
    assert len(jax.devices()) == 2
    n, k = 41, 3  # odd: the second shard holds a padding row
    ei, kw = ref.graph_spec("undirected_loops", seed=5, n=n)
    g = jaxclp.Graph.from_edge_index(ei, n, **kw)
    prior, labels, mask = ref.random_problem(np.random.default_rng(1), n, k)
    h, _ = jaxclp.estimate_compatibility(g, prior, labels, mask)
    sg = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()), ("nodes",)), "nodes", partition="bfs")
    assert sg.padded_nodes > n
    nodes = [0, 20, 40]
    plain = explain(g, prior, labels, mask, h, 0.8, nodes, method="bicgstab", tol=1e-11)
    shard = explain(sg, prior, labels, mask, h, 0.8, nodes, method="bicgstab", tol=1e-11)
    c = np.asarray(shard.contributions)
    assert c.shape == (3, n, k), c.shape
    np.testing.assert_allclose(c, np.asarray(plain.contributions), atol=1e-10)
    np.testing.assert_allclose(c.sum(axis=1), np.asarray(shard.scores), atol=1e-9)
    new = mask.copy(); new[np.flatnonzero(~mask)[:3]] = True
    up = update_beliefs(sg, prior, labels, new, h, 0.8, prior, method="cg", tol=1e-11, cold=True)
    b0 = ref.initial_beliefs(prior, labels, new)
    dense = ref.closed_form(ref.clp_operators(ref.normalize(ref.graph_dense(g), "sym"), b0, np.asarray(h)), prior, 0.8)
    np.testing.assert_allclose(np.asarray(up.beliefs), dense, atol=1e-9)
    print("OK")
""")


def test_explain_and_update_on_two_devices():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=host_devices_env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("OK")
