#!/usr/bin/env bash
# Every performance table of the README, measured with the one harness
# (tools/analysis_tools/benchmark.py): side by side in one run, interleaved repeats, fixed threads.
#
#   bash scripts/benchmarks.sh            # all tables -> benchmarks/*.md (+ .csv)
#   bash scripts/benchmarks.sh plain      # one table: plain | srvit | revit | edge | mor | equal
#
# Run it on an otherwise idle machine: timings on a shared machine are noise.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-benchmarks}
REPEATS=${REPEATS:-15}
mkdir -p "$OUT"
bench() {  # name, then harness arguments
  local name=$1; shift
  echo "=== $name ==="
  "$PY" tools/analysis_tools/benchmark.py "$@" --out "$OUT/$name.md" --csv "$OUT/$name.csv"
}
which=${1:-all}

# Our baseline vs timm's ViT-S (and the fraction of the machine's fp32 matmul peak).
[[ $which == all || $which == plain ]] && bench plainvit_vs_timm \
  plainvit-s='PlainViT(arch="small")' timm-vit-s=timm:vit_small_patch16_224 \
  --batch 1 8 --size 224 --repeats "$REPEATS" --reference timm-vit-s

# SR-ViT eval peak memory is flat in T (batch 8, 512^2; memory only).
[[ $which == all || $which == srvit ]] && bench srvit_memory \
  T1='SRViT(arch="small", num_recursions=1)' T4='SRViT(arch="small", num_recursions=4)' \
  --batch 8 --size 512 --repeats 0 --reference T1

# Online reViT (cached merged experts) vs its folded twin (a PlainViT of the same size);
# 3x the repeats: the target (<= 1.03x) is inside the run-to-run spread of a 15-repeat median.
[[ $which == all || $which == revit ]] && bench revit_vs_folded \
  folded='PlainViT(arch="small")' online='ReViT(arch="small", num_experts=4)' \
  --batch 1 8 --size 224 --repeats "$((REPEATS * 3))" --reference folded

# Edge-RecViT, forced depth assignments vs the same model at full depth, and the
# authors' execution (every token through every step, exited ones masked).
[[ $which == all || $which == edge ]] && bench edgerecvit_speedup \
  full='EdgeRecViT(arch="small", forced_mean_depth=12)' \
  paper-8.3='EdgeRecViT(arch="small", forced_mean_depth=8.3)' \
  half-6.0='EdgeRecViT(arch="small", forced_mean_depth=6.0)' \
  masked-8.3='EdgeRecViT(arch="small", forced_mean_depth=8.3, execution="masked")' \
  --batch 1 4 --size 512 --repeats "$REPEATS" --reference full

# MoR-ViT capacities {1.0 everywhere, default, half the default}, full depth reference,
# next to PlainViT-S.
[[ $which == all || $which == mor ]] && bench morvit_capacities \
  full='MoRViT(arch="small", capacities=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])' \
  default='MoRViT(arch="small")' \
  half='MoRViT(arch="small", capacities=[0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1, 0.05])' \
  plainvit-s='PlainViT(arch="small")' \
  --batch 1 4 --size 512 --repeats "$REPEATS" --reference full

# Recursive backbones at equal block applications (12) vs PlainViT-S.
[[ $which == all || $which == equal ]] && bench equal_applications \
  plainvit-s='PlainViT(arch="small")' \
  naive-s='NaiveRecursiveViT(arch="small", num_blocks=3)' \
  srvit-s-T1='SRViT(arch="small", num_recursions=1)' \
  revit-s='ReViT(arch="small")' \
  edge-s-full='EdgeRecViT(arch="small", forced_mean_depth=12)' \
  mor-s-full='MoRViT(arch="small", capacities=[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])' \
  --batch 1 8 --size 224 --repeats "$REPEATS" --reference plainvit-s
exit 0
