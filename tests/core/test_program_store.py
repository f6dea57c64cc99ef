"""jaxclp.program_store: a stored program gives jax.jit's results bit for bit, skips tracing in a later process
(simulated: the in-process caches cleared), and is keyed by what its lowering reads."""

import collections
import contextlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp import _rng, program_store, sparse
from jaxclp.solve import _solve_jit, solve_operator
from jaxclp.gnn import fit_gcn
from jaxclp.program_store import STORE_ENV, stored_jit
from jaxclp.train import TrainConfig, TrainInfo


@contextlib.contextmanager
def store_in(folder, monkeypatch):
    """The store on, in ``folder`` (JAX's persistent cache folder), for the block."""
    monkeypatch.delenv(STORE_ENV, raising=False)
    old = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(folder))
    try:
        yield folder / "programs"
    finally:
        jax.config.update("jax_compilation_cache_dir", old)


@contextlib.contextmanager
def traces(monkeypatch):
    """Counts the traces of a fit's start state and chunk program inside the block (``jaxclp.train._built`` runs
    once in each trace)."""
    from jaxclp import train
    seen = collections.Counter()
    real = train._built

    def counting(build, data, opts):
        seen["traced"] += 1
        return real(build, data, opts)

    monkeypatch.setattr(train, "_built", counting)
    try:
        yield seen
    finally:
        monkeypatch.setattr(train, "_built", real)


def forget(*programs):
    """What a new process would not have: the programs' in-process caches, those of the start states' shapes
    included (the files stay)."""
    from jaxclp import train
    for p in programs:
        p.clear_cache()
    train._shapes_of.cache_clear()
    jax.clear_caches()


def _leaves(tree):
    return [np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
            for x in jax.tree_util.tree_leaves(tree)]


def _same(a, b):
    return (jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
            and all(np.array_equal(x, y) for x, y in zip(_leaves(a), _leaves(b))))


def _gcn_problem(n=24, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, 3 * n)
    g = jaxclp.Graph.from_edge_index(np.stack([src, rng.integers(0, n, 3 * n)]), n, symmetrize=True)
    x = jnp.asarray(rng.normal(size=(n, 5)))
    y = jnp.asarray(rng.integers(0, 3, n))
    tm = jnp.asarray(np.arange(n) % 3 == 0)
    return g, x, y, tm, ~tm


def _fit(key):
    g, x, y, tm, vm = _gcn_problem()
    return fit_gcn(key, g, x, y, tm, vm, num_classes=3, hidden=(8,), dropout=0.5,
                   cfg=TrainConfig(epochs=6, patience=6))


def test_a_stored_fit_is_the_jitted_fit_bit_for_bit_and_a_later_process_does_not_trace_it(tmp_path, monkeypatch):
    """A GCN fit (its chunk program and the start state's shapes, with typed PRNG keys in and out) through the store
    equals the plain jit's; with the in-process caches cleared it reads the stored programs instead of tracing."""
    from jaxclp.train import _step_chunk
    plain = _fit(jax.random.key(0))
    with store_in(tmp_path, monkeypatch) as folder:
        with traces(monkeypatch) as first:
            stored = _fit(jax.random.key(0))
        files = sorted(p.name for p in folder.iterdir())
        forget(_step_chunk)
        with traces(monkeypatch) as later:
            again = _fit(jax.random.key(0))
        assert sorted(p.name for p in folder.iterdir()) == files  # nothing new written
    assert _same(plain, stored) and _same(plain, again)
    assert isinstance(again.info, TrainInfo)
    assert len(files) == 2  # the chunk program and the start state's
    assert first["traced"] >= 2  # the start state's shapes and the chunk program
    assert later["traced"] == 0, later


def test_a_stored_solve_is_the_jitted_solve(tmp_path, monkeypatch):
    """CLP's solve kernel (static method and iteration cap passed by position) through the store: the same values
    and diagnostics as plain jit, for two methods (two programs)."""
    g, _, y, tm, _ = _gcn_problem(30, 1)
    b0 = jax.nn.one_hot(y, 3) * 0.8 + 0.2 / 3
    op = jaxclp.clp_operator(g, b0, jnp.eye(3))
    want = {m: solve_operator(op, b0, alpha=np.asarray([0.5, 0.9]), method=m) for m in ("neumann", "bicgstab")}
    with store_in(tmp_path, monkeypatch) as folder:
        got = {m: solve_operator(op, b0, alpha=np.asarray([0.5, 0.9]), method=m) for m in want}
        forget(_solve_jit)
        again = {m: solve_operator(op, b0, alpha=np.asarray([0.5, 0.9]), method=m) for m in want}
        assert len(list(folder.iterdir())) == 2
    for m in want:
        arrays = lambda s: tuple(v for v in s if isinstance(v, jax.Array))
        assert _same(arrays(want[m]), arrays(got[m])) and _same(arrays(want[m]), arrays(again[m]))


def test_the_key_follows_static_arguments_settings_and_source(tmp_path, monkeypatch):
    """Another static value, another JAXCLP_* setting or another jaxclp source each write another program; the
    same call twice does not."""
    g, x, y, tm, vm = _gcn_problem()

    def fit(epochs):
        return fit_gcn(jax.random.key(0), g, x, y, tm, vm, num_classes=3, hidden=(8,),
                       cfg=TrainConfig(epochs=epochs, patience=epochs))

    from jaxclp.train import _step_chunk
    with store_in(tmp_path, monkeypatch) as folder:
        count = lambda: len([p for p in folder.iterdir() if p.name.endswith(program_store._SUFFIX)])
        fit(3)
        assert count() == 2
        forget(_step_chunk)
        fit(3)
        assert count() == 2
        fit(4)  # the TrainConfig is static: another chunk program (the start state's shapes are the same)
        assert count() == 4
        monkeypatch.setenv(_rng.ENV, "1")  # JAX's own threefry lowering: another program
        fit(4)
        assert count() == 6
        monkeypatch.setattr(program_store, "_source_digest", lambda: "another source")
        forget(_step_chunk)  # a changed source is a new process
        fit(4)
        assert count() == 8


def test_a_damaged_file_is_written_again(tmp_path, monkeypatch):
    """A stored file that does not read back (truncated) is exported and written again; results unchanged."""
    from jaxclp.train import _step_chunk
    plain = _fit(jax.random.key(1))
    with store_in(tmp_path, monkeypatch) as folder:
        _fit(jax.random.key(1))
        for p in folder.iterdir():
            p.write_bytes(p.read_bytes()[:100])
        forget(_step_chunk)
        with traces(monkeypatch) as seen:
            again = _fit(jax.random.key(1))
        assert seen["traced"] >= 2  # traced again
        assert all(p.stat().st_size > 1000 for p in folder.iterdir())
    assert _same(plain, again)


def test_what_cannot_be_keyed_runs_through_plain_jit(tmp_path, monkeypatch):
    """Nothing is stored for a function outside jaxclp (its source is not in the key) or a call inside another
    trace, and the store is off with $JAXCLP_PROGRAM_STORE=off or without a persistent cache folder; the values
    are jit's either way."""
    from jaxclp.metrics import masked_accuracy
    acc = stored_jit(masked_accuracy)
    scores = jnp.asarray([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    y, m = jnp.asarray([1, 0, 0]), jnp.asarray([True, True, True])
    with store_in(tmp_path, monkeypatch) as folder:
        assert float(stored_jit(lambda x: x * 2.0)(jnp.float32(3))) == 6.0
        assert float(jax.jit(lambda s: acc(s, y, m))(scores)) == pytest.approx(2 / 3)
        assert not folder.exists()
        assert float(acc(scores, y, m)) == pytest.approx(2 / 3)
        assert len(list(folder.iterdir())) == 1
        monkeypatch.setenv(STORE_ENV, "off")
        assert program_store.store_folder() is None
        monkeypatch.delenv(STORE_ENV)
        assert program_store.store_folder() == folder
        jax.config.update("jax_compilation_cache_dir", None)
        assert program_store.store_folder() is None
    with pytest.raises(TypeError, match="named parameters only"):
        stored_jit(lambda *xs: xs)


@pytest.mark.parametrize("static,ok", [((1, 2.5, "a", None, True), True),
                                       (TrainConfig(epochs=3), True),
                                       (jaxclp.gnn.fit._gcn_build, True),
                                       (lambda: 0, False),
                                       (np.float32(1), True),
                                       (object(), False),
                                       (collections.namedtuple("T", "a")(1), False)])
def test_static_values_are_described_by_value_or_refused(static, ok):
    """A static argument is keyed by a description that is the same in every process: values, jaxclp named tuples,
    jaxclp module-level functions; anything else (a lambda, an object, another package's type) is refused."""
    if ok:
        assert program_store._describe(static) == program_store._describe(static)
        assert " at 0x" not in program_store._describe(static)
    else:
        with pytest.raises(program_store._Unstorable):
            program_store._describe(static)


def test_output_trees_round_trip_through_json_and_foreign_types_are_refused():
    """The output tree is stored as JSON: dicts, tuples, lists, None and jaxclp/optax/flax named tuples come back as
    the same tree; a header naming another module's class is refused when read."""
    tree = ({"a": 0, "b": [0, None, (0, 0)]}, TrainInfo(*[0] * len(TrainInfo._fields)))
    back = program_store._decode(json.loads(json.dumps(program_store._encode(tree))))
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(tree)
    with pytest.raises(program_store._Unstorable):
        program_store._encode(collections.namedtuple("T", "a")(0))
    with pytest.raises(ValueError, match="not allowed"):
        program_store._decode({"namedtuple": "os:system", "fields": []})


def test_a_stored_fit_in_chunks_compiles_its_program_once(tmp_path, monkeypatch):
    """Under a deadline the chunks of a fit call its program with host arrays first and the program's own outputs
    later: the stored program commits its inputs to one device, so both calls run one executable."""
    import time

    compiled = collections.Counter()

    def listen(event, secs, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled[kw.get("fun_name", "?")] += 1

    g, x, y, tm, vm = _gcn_problem()
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        with store_in(tmp_path, monkeypatch):
            res = fit_gcn(jax.random.key(2), g, x, y, tm, vm, num_classes=3, hidden=(8,),
                          cfg=TrainConfig(epochs=120, patience=120), deadline=time.perf_counter() + 600)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert int(res.info.epochs_run) == 120
    assert compiled["jit(_step_chunk)"] == 1, compiled


def test_the_environment_variables_read_at_trace_time_are_in_the_key():
    """Of jaxclp's numeric modules only jaxclp.sparse and jaxclp._rng read the environment (at trace time), and the
    store's settings hold both (a module that starts reading one must be added to program_store._settings)."""
    import os
    from pathlib import Path
    root = Path(jaxclp.__file__).parent
    readers = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")
                     if "os.environ" in p.read_text() and p.parts[len(root.parts)] not in ("datasets", "experiments")
                     and p.name not in ("compilation_cache.py", "program_store.py"))
    assert readers == ["_rng.py", "sparse.py"], readers
    base = program_store._settings()
    for name, value in ((_rng.ENV, "1"), (sparse.GPU_SPMM_ENV, "xla")):
        old = os.environ.get(name)
        os.environ[name] = value
        try:
            assert program_store._settings() != base, name
        finally:
            if old is None:
                del os.environ[name]
            else:
                os.environ[name] = old
    with sparse.xla_path():
        assert program_store._settings() != base


def test_an_export_that_fails_runs_plain_jit_and_is_not_tried_again(tmp_path, monkeypatch):
    """Where jax.export refuses a program, the call runs through plain jit (same values) and later calls with the
    same key do not try again."""
    from jaxclp.metrics import masked_accuracy
    acc = stored_jit(masked_accuracy)
    tried = []

    def refuse(*args, **kwargs):
        tried.append(1)
        raise NotImplementedError("no export here")

    scores = jnp.asarray([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    y, m = jnp.asarray([1, 0, 0]), jnp.asarray([True, True, True])
    with store_in(tmp_path, monkeypatch) as folder:
        monkeypatch.setattr(jax.export, "export", refuse)
        assert [float(acc(scores, y, m)) for _ in range(3)] == [pytest.approx(2 / 3)] * 3
        assert len(tried) == 1 and not folder.exists()
