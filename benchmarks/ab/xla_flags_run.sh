#!/bin/bash
# One `jaxclp run --dataset DATASET --methods clp --runs RUNS --time-limit none` in a fresh process with the persistent
# XLA cache off and XLA_FLAGS as given: wall time, peak RSS, and each record (run, base prior, val, test, seconds),
# so two flag sets are compared on the same records. benchmarks/results/xla_flags.md.
# usage: benchmarks/ab/xla_flags_run.sh TAG "XLA_FLAGS" DATASET RUNS
cd "$(dirname "$0")/../.."
out=${PROBE_OUT:-/tmp/xla_flags}/$1_$3; rm -rf $out; mkdir -p $out
export JAXCLP_DATA_URL=file://$(cd ../shared/datasets && pwd) JAXCLP_XLA_CACHE=off XLA_FLAGS="$2"
/usr/bin/time -f "%e s wall %M KB" .venv/bin/jaxclp run --dataset $3 --methods clp --runs $4 --out $out --no-progress --time-limit none > $out/log 2>&1
tail -1 $out/log
python3 -c "
import json,sys
for l in open('$out/results.jsonl'):
    r=json.loads(l)
    if r.get('type')=='result': print(r['run'], r['params'].get('base_prior'), round(r['val'],6), round(r['test'],6), round(r['seconds'],1))
"
