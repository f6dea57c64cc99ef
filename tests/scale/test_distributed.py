"""Many processes: the sharded CLP under ``jax.distributed`` equals one process's unsharded result.

Two processes on 127.0.0.1 (a free port), each with two forced host CPU devices and jax's gloo CPU
collectives, form one 4-device global mesh (the ``nodes`` axis spans both processes). Each builds the same
:class:`jaxclp.ShardedGraph` (its arrays are global: every process holds only its own two shards) and runs
the sharded products; process 0 gathers the results to the host with
``jax.experimental.multihost_utils.process_allgather`` and compares them in float64 with the unsharded
library run locally. Both processes are killed on failure or after the timeout.
"""

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from reference import host_devices_env

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240  # a guard against a hung collective; the test takes ~20-40 s idle, 90+ s at load 12-15

WORKER = textwrap.dedent("""
    import os, sys, traceback
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    pid, coordinator = int(sys.argv[1]), sys.argv[2]
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, num_processes=2, process_id=pid, initialization_timeout=40)

    def _exit_on_error(kind, value, tb):  # a failed process must not hang in jax.distributed's shutdown
        traceback.print_exception(kind, value, tb)
        sys.stdout.flush()
        os._exit(1)

    sys.excepthook = _exit_on_error
    import numpy as np, jax.numpy as jnp, jaxclp
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh
    from jaxclp import sharded_clp, sharded_graph

    assert (jax.process_count(), jax.process_index()) == (2, pid)
    assert len(jax.local_devices()) == 2 and len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("nodes",))  # process 0 owns shards 0, 1; process 1 shards 2, 3

    def host(x):  # a global array -> the same numpy array on every process
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    def close(a, b, what, rtol=1e-12, atol=1e-12):
        np.testing.assert_allclose(a, np.asarray(b), rtol=rtol, atol=atol, err_msg=what)

    # the same inputs on both processes (one seed); n = 37 is not divisible by 4, nodes 30..36 isolated
    rng = np.random.default_rng(0)
    K = 3
    s, r = rng.integers(0, 30, 90), rng.integers(0, 30, 90)
    g = jaxclp.Graph.from_edge_index(np.stack([s, r]), 37, weights=rng.uniform(0.5, 2, 90))
    # n = 40 divisible by 4: user-order results stay sharded over both processes
    s, r = rng.integers(0, 40, 120), rng.integers(0, 40, 120)
    g40 = jaxclp.Graph.from_edge_index(np.stack([s, r]), 40)
    H = rng.dirichlet(np.ones(K), size=K)
    H = (H + H.T) / 2
    results = {}
    for name, gr, part in (("n37", g, "bfs"), ("n40", g40, "rcm")):
        n = gr.num_nodes
        b0 = np.asarray(jax.nn.softmax(jnp.asarray(rng.normal(size=(n, K)))))
        prior = np.asarray(jax.nn.softmax(jnp.asarray(rng.normal(size=(n, K)))))
        labels, train = rng.integers(0, K, n), rng.random(n) < 0.4
        sg = jaxclp.shard_graph(gr, mesh, "nodes", partition=part)
        assert not sg.weights.is_fully_addressable  # the graph's arrays span both processes
        assert len(sg.weights.addressable_shards) == 2
        out = sharded_clp.propagate(sg, b0, H, prior, alpha=0.8, num_iters=9)
        if n % 4 == 0:
            assert out.sharding.spec == jax.sharding.PartitionSpec("nodes") and not out.is_fully_addressable
        sol = sharded_clp.solve(sg, b0, H, prior, alpha=0.9, method="neumann", tol=1e-11)
        results[name] = dict(
            propagate=host(out), public=host(jaxclp.propagate(sg, b0, H, prior, alpha=0.8, num_iters=9)),
            solve=host(sol.value), iterations=np.asarray(sol.iterations),
            compat=np.asarray(jaxclp.estimate_compatibility(sg, prior, labels, train)[0]),
            homophily=float(jaxclp.edge_homophily(sg, labels)),
            # jax.make_mesh's Explicit axes across both processes: the same solve as the hand-built mesh
            made=host(jaxclp.solve(jaxclp.shard_graph(gr, jax.make_mesh((4,), ("nodes",)), partition=part), b0, H,
                                   prior, alpha=0.9, method="neumann", tol=1e-11).value))
        if pid == 0:  # the reference: one process, unsharded, on one local device
            r = results[name]
            close(r["propagate"], jaxclp.propagate(gr, b0, H, prior, alpha=0.8, num_iters=9), name + " propagate")
            close(r["public"], r["propagate"], name + " jaxclp.propagate(sg)")
            want = jaxclp.solve(gr, b0, H, prior, alpha=0.9, method="neumann", tol=1e-11)
            close(r["solve"], want.value, name + " solve", rtol=1e-10, atol=1e-12)
            close(r["made"], want.value, name + " solve on jax.make_mesh", rtol=1e-10, atol=1e-12)
            np.testing.assert_array_equal(r["iterations"], np.asarray(want.iterations))
            close(r["compat"], jaxclp.estimate_compatibility(gr, prior, labels, train)[0], name + " compat")
            close(r["homophily"], jaxclp.edge_homophily(gr, labels), name + " homophily")
    # each process builds only its own shards from only its own edges (receiver on one of its shards)
    assert sharded_graph.local_shards(mesh) == [2 * pid, 2 * pid + 1]
    for gr in (g, g40):
        n = gr.num_nodes
        sr, rr, wr = (np.asarray(a) for a in (gr.senders, gr.receivers, gr.weights))
        keep = np.isin(rr // -(-n // 4), sharded_graph.local_shards(mesh))
        assert 0 < keep.sum() < rr.size
        sgl = jaxclp.shard_graph_local(sr[keep], rr[keep], wr[keep], n, mesh, "nodes", symmetric=gr.symmetric)
        assert not sgl.weights.is_fully_addressable
        ref = jaxclp.shard_graph(gr, mesh, "nodes")  # the whole graph on every process
        assert (sgl.block, sgl.halo, sgl.offsets, sgl.symmetric) == (ref.block, ref.halo, ref.offsets, ref.symmetric)
        for f in ("receivers", "senders", "senders_global", "weights", "num_edges", "send", "send_offsets",
                  "recv_slots", "order", "rank"):
            np.testing.assert_array_equal(host(getattr(sgl, f)), host(getattr(ref, f)), err_msg=f)
        b0 = np.asarray(jax.nn.softmax(jnp.asarray(rng.normal(size=(n, K)))))
        got = host(jaxclp.solve(sgl, b0, H, b0, alpha=0.9, method="cg", tol=1e-11).value)
        if pid == 0:
            want = jaxclp.solve(gr, b0, H, b0, alpha=0.9, method="dense").value
            close(got, want, f"shard_graph_local n={n} solve", rtol=1e-8, atol=1e-10)
    try:
        jaxclp.shard_graph_local(np.array([0]), np.array([(1 - pid) * 20]), np.ones(1), 40, mesh, "nodes")
        raise AssertionError("an edge of another process was accepted")
    except ValueError as err:
        assert "receivers" in str(err), err
    multihost_utils.sync_global_devices("done")
    print(f"OK {pid}", flush=True)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_available() -> bool:
    try:
        from jax._src.lib import _jax
    except ImportError:
        return False
    return hasattr(_jax, "make_gloo_tcp_collectives")


@pytest.mark.slow  # ~25 s: two jax.distributed processes compile everything (benchmarks/slow_tests.py)
def test_two_processes_equal_one_process(tmp_path):
    if not _gloo_available():
        pytest.skip("this jaxlib has no gloo CPU collectives (jax_cpu_collectives_implementation='gloo')")
    env = host_devices_env()  # the workers force their host devices
    coordinator = f"127.0.0.1:{_free_port()}"
    logs = [open(tmp_path / f"worker{i}.log", "w+") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(i), coordinator], cwd=REPO, env=env,
                              stdout=logs[i], stderr=subprocess.STDOUT, text=True) for i in range(2)]
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs):
                break  # one failed: do not wait for the other to time out on a collective
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    out = []
    for f in logs:
        f.seek(0)
        out.append(f.read())
        f.close()
    report = "\n".join(f"--- process {i} (rc {p.returncode}):\n{o[-3000:]}" for i, (p, o) in enumerate(zip(procs, out)))
    assert all(p.returncode == 0 for p in procs), report
    for i, o in enumerate(out):
        assert f"OK {i}" in o, report
