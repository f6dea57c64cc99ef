"""CLP's propagation stages on a graph padded to its shape bucket (jaxclp.buckets.propagation_graph: padding nodes
marked, their rows zeroed inside the stages) give the unpadded graph's numbers on the real rows, to float rounding,
and a graph of another size in the same bucket reuses the compiled programs."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp import buckets
from jaxclp.nonlinear import nonlinear_grid

from files import noisy_prior_problem, propagation_problem


def _padded(graph, prior, labels, train, val):
    pg = buckets.propagation_graph(graph)
    nb = pg.num_nodes
    return (pg, buckets.pad_prior(prior, nb), buckets.pad_nodes(labels, nb, 0),
            buckets.pad_nodes(train, nb, False), buckets.pad_nodes(val, nb, False))


def test_propagation_graph_marks_the_padding():
    g, y, tm, vm, prior = noisy_prior_problem(n=300)
    pg = buckets.propagation_graph(g)
    assert pg.num_nodes == buckets.node_bucket(300) == 320 and pg.num_edges == buckets.bucket(g.num_edges, 256)
    assert pg.real_nodes == 300 and np.asarray(pg.real_rows).sum() == 300 and not np.asarray(pg.real)[300:].any()
    x = np.arange(320 * 2, dtype=np.float32).reshape(320, 2) + 1
    out = np.asarray(pg.to_internal(x))
    np.testing.assert_array_equal(out[:300], x[:300])
    assert not out[300:].any()
    traced = np.asarray(jax.jit(pg.to_internal)(x))  # the traced path agrees
    np.testing.assert_array_equal(traced, out)
    a = x[:300]
    assert g.real_nodes == 300 and g.real_rows is None and g.to_internal(a) is a
    with pytest.raises(ValueError, match=r"real must have shape \(320,\)"):
        dataclasses.replace(pg, real=jnp.ones(300, bool))


@pytest.mark.parametrize("n,normalization,l1,src,scaled", [  # 300 nodes: the dense solve; 330: CG / BiCGStab
    (300, "sym", False, "mlp", False), (330, "sym", False, "mlp", False), (330, "row", False, "b0", False),
    (330, "none", False, "mlp", False), (330, "sym", True, "mlp", False), (330, "row", True, "b0", False),
    (330, "sym", False, "b0", True), (330, "row", False, "mlp", True)])
def test_clp_beliefs_padded_equal_unpadded(n, normalization, l1, src, scaled):
    g, y, tm, vm, prior = noisy_prior_problem(n=n)
    alphas = (0.1, 0.5, 0.9, 0.99) if scaled else (0.1, 0.5, 0.9)
    kw = dict(alphas=alphas, normalization=normalization, l1_normalize=l1, prior_source=src, spectrum=False,
              spectral_scale=scaled)
    want = jaxclp.clp_beliefs(g, prior, y, tm, **kw)
    pg, pp, py, ptm, _ = _padded(g, prior, y, tm, vm)
    got = jaxclp.clp_beliefs(pg, pp, py, ptm, **kw)
    np.testing.assert_allclose(np.asarray(got.H), np.asarray(want.H), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got.valid, want.valid)
    assert got.method == want.method
    b = np.asarray(got.beliefs)
    np.testing.assert_allclose(b[:, :n], np.asarray(want.beliefs), rtol=1e-4, atol=1e-5)
    if not l1:  # the linear solves: zero on the padding rows (their prior rows are zeroed)
        assert not b[:, n:].any()


def test_label_propagation_cs_and_clp_star_padded_equal_unpadded():
    g, prior, y, tm, vm = propagation_problem(n=173)
    pg, pp, py, ptm, _ = _padded(g, prior, y, tm, vm)
    alphas = jnp.asarray([0.3, 0.9])
    lp = jaxclp.label_propagation(g, y, tm, 3, alpha=alphas)
    lp_p = jaxclp.label_propagation(pg, py, ptm, 3, alpha=alphas)
    np.testing.assert_allclose(np.asarray(lp_p)[:, :173], np.asarray(lp), rtol=1e-4, atol=1e-5)
    cs = jaxclp.correct_and_smooth(g, prior, y, tm, alpha_correct=0.5, alpha_smooth=alphas, scale="auto")
    cs_p = jaxclp.correct_and_smooth(pg, pp, py, ptm, alpha_correct=0.5, alpha_smooth=alphas, scale="auto")
    np.testing.assert_allclose(np.asarray(cs_p)[:, :173], np.asarray(cs), rtol=1e-4, atol=1e-5)
    H, _ = jaxclp.estimate_compatibility(g, prior, y, tm)
    H_p, _ = jaxclp.estimate_compatibility(pg, pp, py, ptm)
    np.testing.assert_allclose(np.asarray(H_p), np.asarray(H), rtol=1e-5, atol=1e-6)
    b0 = jaxclp.initial_beliefs(prior, y, tm)
    b0_p = jaxclp.initial_beliefs(pp, py, ptm)
    star = jaxclp.clp_star(g, prior, b0, H, alpha=alphas)
    star_p = jaxclp.clp_star(pg, pp, b0_p, H_p, alpha=alphas)
    np.testing.assert_allclose(np.asarray(star_p)[:, :173], np.asarray(star), rtol=1e-4, atol=1e-5)


def test_nonlinear_grid_padded_equal_unpadded():
    g, y, tm, vm, prior = noisy_prior_problem(n=300)
    labels = np.where(tm | vm, y, -1)
    kw = dict(metric="accuracy", echo=(False,), alphas=(0.3, 0.9))
    want = nonlinear_grid(g, prior, labels, tm, vm, **kw)
    pg, pp, _, ptm, pvm = _padded(g, prior, y, tm, vm)
    got = nonlinear_grid(pg, pp, buckets.pad_nodes(labels, pg.num_nodes, -1), ptm, pvm, **kw)
    assert got.configs == want.configs
    np.testing.assert_array_equal(np.asarray(got.layer), np.asarray(want.layer))
    np.testing.assert_allclose(np.asarray(got.beliefs)[:, :300], np.asarray(want.beliefs), rtol=1e-4, atol=1e-5)


def test_graphs_of_one_bucket_share_the_propagation_programs():
    """Graphs of 270 and 267 nodes pad to the same bucket: the second compiles no program of clp_beliefs."""
    from files import compiled_programs

    g, y, tm, vm, prior = noisy_prior_problem(n=270)
    s, r, w = (np.asarray(a) for a in (g.senders, g.receivers, g.weights))
    keep = (s < 267) & (r < 267)  # the same graph without its last 3 nodes
    g2 = jaxclp.Graph.from_edge_index(np.stack([s[keep], r[keep]]), 267, weights=w[keep])
    assert g.symmetric and g2.symmetric
    p2 = jax.nn.softmax(jnp.asarray(np.asarray(prior)[:267]) * 2.0, axis=1)
    runs = [_padded(g, prior, y, tm, vm)[:4], _padded(g2, p2, y[:267], tm[:267], vm[:267])[:4]]
    assert runs[0][0].num_nodes == runs[1][0].num_nodes and runs[0][0].num_edges == runs[1][0].num_edges
    kw = dict(alphas=(0.1, 0.5, 0.9), normalization="sym", spectrum=True, method="cg")  # a solver of its own
    jaxclp.clp_beliefs(*runs[0], **kw).beliefs.block_until_ready()
    with compiled_programs() as names:
        jaxclp.clp_beliefs(*runs[1], **kw).beliefs.block_until_ready()
    assert names == [], names
