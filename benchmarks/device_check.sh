#!/usr/bin/env bash
# The accelerator check behind benchmarks/results/device.md: run on a machine with a GPU, from the repository
# root, with the datasets at ../shared/datasets (or $JAXCLP_DATA) and an output folder as $1 (default ./device_out).
# Uses the machine's own jax/jaxlib/flax/optax (a CUDA build): installs jaxclp without dependencies, then
#   1. python -m jaxclp.benchmarks.device (CLP step, closed form, jaxclp.CLP end to end, tuned-GNN steps/fits),
#   2. the numerical test modules on the GPU backend (x64, as in CI).
# Every stage has its own time limit, so one stuck stage cannot lose the others' results.
set -uo pipefail
OUT=${1:-device_out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
export JAXCLP_DATA=${JAXCLP_DATA:-$(cd .. && pwd)/shared/datasets}
{ nvidia-smi; $PY -c "import jax, flax, optax; print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__, 'optax', optax.__version__)"; } > "$OUT/env.txt" 2>&1
timeout ${INSTALL_S:-150} $PY -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1
$PY -c "import jaxclp, jaxclp.benchmarks; print('jaxclp', jaxclp.__file__)" >> "$OUT/env.txt" 2>&1
timeout ${BENCH_S:-270} $PY -m jaxclp.benchmarks.device --out "$OUT" --budget ${BUDGET_S:-170} > "$OUT/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/env.txt"
timeout ${TEST_S:-200} $PY -m pytest -q -n ${WORKERS:-12} -p no:cacheprovider --junitxml="$OUT/tests.xml" \
  tests/test_kernel.py tests/test_operator.py tests/test_propagate.py tests/test_solve.py tests/test_solve_grad.py \
  tests/test_compat.py tests/test_sinkhorn.py tests/test_spectral_norm.py tests/test_gnn.py tests/test_mlp_estimator.py \
  tests/test_priors.py tests/test_authors.py tests/test_clp_refined.py tests/test_baselines.py tests/test_graph.py \
  tests/test_features.py tests/test_validation.py tests/test_train.py tests/test_sharding.py \
  tests/test_paper.py tests/test_rng.py tests/test_homophily_metrics.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/env.txt"
