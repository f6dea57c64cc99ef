#!/usr/bin/env bash
# The cost benchmark (`python -m benchmarks.cost`) on a lent GPU machine, then `jaxclp reproduce` of stale
# records with the time left, all inside one device call. From the repository root:
#   benchmarks/device_cost.sh OUT [LIMIT_S]
# Inputs carried with the call (gitignored): .whl/jraph-*.whl (no network there) and the datasets under
# .devdata/datasets (a copy of ../shared/datasets' medium-table folders; run's carry [".whl", ".devdata"]).
# Uses the machine's own jax/flax/optax (a CUDA build) and jaxclp from ./src (PYTHONPATH; no install, so no C++
# build: the fused kernel is the CPU lowering and unused on a GPU).
#   1. cost: LANES (space-separated lanes, each a comma list of graphs) run as that many processes at once,
#      each `cost --runs RUNS --tag TAGI` (TAG default gpu_lane) with a fresh XLA cache per graph (cost.py's default), for at most
#      COST_S seconds; per graph: wall, compile seconds, compilations, each split's record seconds (the first
#      split pays the compilations; the later ones are the steady state). Lanes share the 16-core host and the
#      one GPU: say so beside the numbers.
#   2. reproduce: REPRO (space-separated TARGET:GRAPH items) with EXTRA_ARGS (default --replace-stale), one
#      benchmarks/device_reproduce.sh process per item, all at once, until LIMIT_S minus a margin.
# Everything comes back as OUT/results.tgz (the tool returns at most 8 files): cost JSONs, logs, and per item
# TARGET_GRAPH/TARGET/results.jsonl (merge: `python -m benchmarks.merge_records DIR/TARGET_GRAPH TARGET`).
set -uo pipefail
OUT=$1 LIMIT=${2:-540}
PY=${PYTHON:-python3}
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
mkdir -p "$OUT/work" /tmp/site
ls .whl/*.whl > /dev/null 2>&1 && $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
  > "$OUT/work/install.log" 2>&1
export PYTHONPATH=$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export JAXCLP_DATA_URL=${JAXCLP_DATA_URL:-file://$PWD/.devdata/datasets}
{ nvidia-smi -L; $PY -c "import jax, flax, optax, jaxclp; print('jax', jax.__version__, jax.devices(), 'flax', \
flax.__version__, 'optax', optax.__version__, 'jaxclp', jaxclp.__file__)"; nproc; } > "$OUT/work/env.txt" 2>&1
LANES=${LANES:-"deezer-europe,texas,cornell,brazil-airports squirrel,wisconsin,europe-airports minesweeper,actor,usa-airports wiki,twitch-en,twitch-ru,chameleon"}
i=0
for lane in $LANES; do
  timeout "${COST_S:-300}" $PY -m benchmarks.cost --datasets "$lane" --runs "${RUNS:-2}" --tag "${TAG:-gpu_lane}$i" \
    > "$OUT/work/cost$i.log" 2>&1 &
  i=$((i + 1))
done
wait
echo "cost: $i lanes done after $(elapsed) s" >> "$OUT/work/env.txt"
cp benchmarks/results/cost_${TAG:-gpu_lane}*.json "$OUT/work/" 2>/dev/null
left=$(( LIMIT - $(elapsed) - ${MARGIN:-30} ))
if [ "$left" -ge 60 ]; then
  for item in ${REPRO:-}; do
    SKIP_INSTALL=1 EXTRA_ARGS=${EXTRA_ARGS:---replace-stale} \
      bash benchmarks/device_reproduce.sh "$OUT/work/${item%%:*}_${item#*:}" "${item%%:*}" "${item#*:}" "$left" &
  done
  wait
fi
echo "all done after $(elapsed) s" >> "$OUT/work/env.txt"
find "$OUT/work" -name xla-cache.tgz -delete
tar czf "$OUT/results.tgz" -C "$OUT/work" .
