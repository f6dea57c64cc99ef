#!/usr/bin/env bash
# Runs one `jaxclp reproduce` target on a GPU machine: how the GPU-made records in results/ were produced (each
# record's "backend" and "devices" fields name the device; configurations do not depend on the backend, so such
# records resume and summarise with the CPU-made ones). From the repository root:
#   benchmarks/device_reproduce.sh OUT TARGET DATASETS [LIMIT_S]
# (DATASETS "-": the target's own datasets, every record of it seeded; the way to run a figure target)
# Uses the machine's own jax/flax/optax (a CUDA build) and installs jaxclp without dependencies (jraph from ./.whl
# when present, for machines without network). Seeds OUT/TARGET/results.jsonl with results/TARGET's records of
# DATASETS (and of the targets it shares records with, reproduce.SHARES), so finished splits are skipped, then
# runs until done or LIMIT_S seconds (default 420): the runner
# appends one record per finished (dataset, split, method), so a stopped run keeps what it finished. Data from
# $JAXCLP_DATA_URL (default file://../shared/datasets). The new records are the lines of OUT/TARGET/results.jsonl
# that results/TARGET/results.jsonl does not hold (header records included); append them there with
# `python -m benchmarks.merge_records FILES_AT/OUT TARGET` (a figure target: TARGET = figures/records/<name>, one
# merge per records folder it uses, e.g. figures/records/synthetic for fig4/fig5). For a
# re-run of a changed method (e.g. table2's `clp` after a revision) pass EXTRA_ARGS=--replace-stale; after merging,
# run `jaxclp reproduce TARGET --out results --replace-stale --datasets DATASETS` here: it moves the old records
# to results.stale.jsonl and, every split being done, computes nothing.
set -uo pipefail
OUT=$1 TARGET=$2 DATASETS=$3 LIMIT=${4:-420}
PY=${PYTHON:-python3}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
# XLA's persistent compilation cache (kept while the machine stays warm). On an H200 (session 14) deezer-europe's
# first split took ~6 min (its fits' seconds: compilation, autotuning, first use; not separated), later splits
# 8-20 s; a second process on the same warm machine (without this cache then) ~1 min for its first split
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-${TMPDIR:-/tmp}/jaxclp-xla-cache}
export JAXCLP_XLA_CACHE=$JAX_COMPILATION_CACHE_DIR  # the CLI sets JAX's cache dir from this (experiments/cli.py)
# A fresh machine starts with an empty cache, and every dataset's first split pays ~3 min of compilation (an H100,
# session 17). The cache a run leaves is packed into ONE file, OUT/xla-cache.tgz (when under 48 MiB: the device
# tool returns a limited number of files, and session 18's cache had ~270 entries, of which 2 came back as files);
# copied to ./.devcache/xla-cache.tgz (gitignored; `run`'s carry [".devcache"]) it seeds the next machine's cache.
# Entries are keyed by program, jax version and device, so a different GPU or jax simply misses.
mkdir -p "$JAX_COMPILATION_CACHE_DIR" "$OUT"
[ -f .devcache/xla-cache.tgz ] && tar xzf .devcache/xla-cache.tgz -C "$JAX_COMPILATION_CACHE_DIR" --skip-old-files \
  2>/dev/null && echo "xla cache seeded: $(ls "$JAX_COMPILATION_CACHE_DIR" | wc -l) entries" >> "$OUT/seed.txt"
export JAXCLP_DATA_URL=${JAXCLP_DATA_URL:-file://$(cd .. && pwd)/shared/datasets}
# Derived (†) features computed here and carried in .devdata/cache (`python -m benchmarks.dagger_blocks --cache
# .devdata/cache NAMES`): the device then uses this machine's arrays, so its † records join the CPU-made ones
[ -d .devdata/cache ] && export JAXCLP_CACHE=${JAXCLP_CACHE:-$PWD/.devdata/cache}
mkdir -p "$OUT/$TARGET"
if [ "${SKIP_INSTALL:-0}" != 1 ]; then  # benchmarks/device_queue.sh installs once, for its first spec
  ls .whl/*.whl >/dev/null 2>&1 && $PY -m pip install -q --no-deps .whl/*.whl > "$OUT/install.log" 2>&1
  timeout 150 $PY -m pip install --no-deps --no-build-isolation -e . >> "$OUT/install.log" 2>&1
fi
{ nvidia-smi -L; $PY -c "import jax, flax, optax; print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__, 'optax', optax.__version__)"; } > "$OUT/env.txt" 2>&1
$PY -m benchmarks.merge_records --seed "$OUT" "$TARGET" "$DATASETS"
start=$(date +%s)
DS_ARGS=(--datasets "$DATASETS"); [ "$DATASETS" = "-" ] && DS_ARGS=()
timeout "$LIMIT" $PY -m jaxclp reproduce "$TARGET" --out "$OUT" "${DS_ARGS[@]}" ${EXTRA_ARGS:-} > "$OUT/run.log" 2>&1
echo "reproduce rc=$? after $(( $(date +%s) - start )) s" >> "$OUT/env.txt"
cache_kib=$(du -sk "$JAX_COMPILATION_CACHE_DIR" | cut -f1)
echo "xla cache: $(ls "$JAX_COMPILATION_CACHE_DIR" | wc -l) entries, ${cache_kib} KiB" >> "$OUT/env.txt"
[ "$cache_kib" -lt 49152 ] && tar czf "$OUT/xla-cache.tgz" -C "$JAX_COMPILATION_CACHE_DIR" .
