#!/usr/bin/env bash
# The accelerator check behind benchmarks/results/device.md: run on a machine with a GPU, from the repository
# root, with the datasets at ../shared/datasets (or $JAXCLP_DATA) and an output folder as $1 (default ./device_out).
# Uses the machine's own jax/jaxlib/flax/optax (a CUDA build): installs jaxclp without dependencies, then
#   1. python -m benchmarks.device (CLP step, closed form, jaxclp.CLP end to end, tuned-GNN steps/fits),
#   2. python -m benchmarks.gpu_spmm (the CSR product's CUDA lowerings, benchmarks/results/gpu_spmm.md),
#   3. the test suite on the GPU backend (x64, as in CI; all modules but datasets, packaging and README).
# Every stage has its own time limit, so one stuck stage cannot lose the others' results; STAGES (default
# bench,spmm,tests) picks stages: all three exceed one device call's 600 s.
set -uo pipefail
OUT=${1:-device_out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
export JAXCLP_DATA=${JAXCLP_DATA:-$(cd .. && pwd)/shared/datasets}
{ nvidia-smi; $PY -c "import jax, flax, optax; print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__, 'optax', optax.__version__)"; } > "$OUT/env.txt" 2>&1
ls .whl/*.whl > /dev/null 2>&1 && $PY -m pip install -q --no-deps .whl/*.whl > /dev/null 2>&1  # jraph (no network there)
timeout ${INSTALL_S:-150} $PY -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1
$PY -c "import jaxclp, benchmarks; print('jaxclp', jaxclp.__file__)" >> "$OUT/env.txt" 2>&1
has() { [[ ",${STAGES:-bench,spmm,tests}," == *",$1,"* ]]; }  # e.g. STAGES=spmm,tests (one call is <= 600 s)
if has bench; then
  timeout ${BENCH_S:-270} $PY -m benchmarks.device --out "$OUT" --budget ${BUDGET_S:-170} > "$OUT/bench.log" 2>&1
  echo "bench rc=$?" >> "$OUT/env.txt"
fi
if has spmm; then
  timeout ${SPMM_S:-90} $PY -m benchmarks.gpu_spmm --out "$OUT" > "$OUT/spmm.log" 2>&1
  echo "gpu_spmm rc=$?" >> "$OUT/env.txt"
fi
# The tests read ../shared/datasets (they skip without it): link the datasets the CLI/runner tests use when a
# copy travelled elsewhere ($JAXCLP_DATA, e.g. .devdata/datasets carried to a device machine).
[ -d ../shared/datasets ] || { mkdir -p ../shared 2>/dev/null && ln -sfn "$JAXCLP_DATA" ../shared/datasets; }
# The whole suite but the dataset registry (all 18 datasets' files), packaging (pip builds) and README (a fresh
# install) modules; SIGINT at the limit so pytest still writes its summary and tests.xml (session 25: 286 s, -n 15)
if has tests; then
  timeout -s INT -k 30 ${TEST_S:-300} $PY -m pytest -q -n ${WORKERS:-15} -p no:cacheprovider -rfs \
    --junitxml="$OUT/tests.xml" tests --ignore=tests/datasets/test_datasets.py --ignore=tests/package/test_packaging.py \
    --ignore=tests/package/test_readme.py > "$OUT/tests.log" 2>&1
  echo "tests rc=$?" >> "$OUT/env.txt"
fi
