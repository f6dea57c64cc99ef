#!/usr/bin/env bash
# Runs several `jaxclp reproduce` targets one after the other on a lent GPU machine, within one deadline, so that
# one device call (at most 10 min) uses all of its time: each spec goes to benchmarks/device_reproduce.sh with the
# seconds left (minus a margin for the cache/merge step), in order, until the time is spent. From the repository root:
#   benchmarks/device_queue.sh OUT LIMIT_S TARGET:DATASETS[:EXTRA_ARGS] [TARGET:DATASETS[:EXTRA_ARGS] ...]
# e.g. benchmarks/device_queue.sh $OUT 540 table_homophily:coauthor-cs,coauthor-physics \
#        table4:chameleon,squirrel,wiki:--replace-stale
# Spec i writes OUT/qI/<target>/results.jsonl (merge each with `python -m benchmarks.merge_records FILES_AT/qI
# TARGET`; OUT/qI/env.txt says how far it got). jaxclp is installed once (the first spec); the XLA cache is shared
# by all specs and returned once, as OUT/xla-cache.tgz, by the last spec that ran.
set -uo pipefail
OUT=$1 LIMIT=$2; shift 2
MARGIN=${MARGIN:-25}
start=$(date +%s)
i=0
for spec in "$@"; do
  IFS=: read -r target datasets extra <<< "$spec"
  left=$(( LIMIT - ($(date +%s) - start) - MARGIN ))
  if [ "$left" -lt 60 ]; then echo "queue: no time left for $spec" | tee -a "$OUT/queue.txt"; continue; fi
  echo "queue: $spec with ${left} s" | tee -a "$OUT/queue.txt"
  SKIP_INSTALL=$([ "$i" -gt 0 ] && echo 1 || echo 0) EXTRA_ARGS="$extra" \
    bash benchmarks/device_reproduce.sh "$OUT/q$i" "$target" "$datasets" "$left"
  [ -f "$OUT/q$i/xla-cache.tgz" ] && mv -f "$OUT/q$i/xla-cache.tgz" "$OUT/xla-cache.tgz"
  i=$((i + 1))
done
echo "queue: done after $(( $(date +%s) - start )) s" | tee -a "$OUT/queue.txt"
