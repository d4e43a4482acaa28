#!/usr/bin/env bash
# The GPU check, ready to run on a CUDA machine (about 5 minutes on one modern GPU):
#   1. every backbone (S) at 1024x1024 in bf16, one training step each (train mode, forward,
#      backward, AdamW step), side by side: global attention, window attention (14, global at
#      the stage ends: ViTDet), and window attention with activation checkpointing;
#   2. the toy UperNet and the toy Mask R-CNN (the latter if mmcv has CUDA ops) trained for a few
#      iterations on the GPU.
# It writes $OUT/gpu.md (default benchmarks/gpu.md).
#
#   bash scripts/gpu_check.sh            # on a GPU
#   bash scripts/gpu_check.sh --smoke    # the same code on the CPU at a tiny size (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SMOKE=0
[[ ${1:-} == --smoke ]] && SMOKE=1
if [[ $SMOKE == 1 ]]; then
  OUT=${OUT:-work_dirs/gpu_check_smoke}
  DEVICE=cpu SIZE=64 ARCH=tiny REPEATS=1 WARMUP=1 ITERS=2 WINDOW=2 EXTRA=", embed_dim=32, num_heads=2, img_size=64"
else
  OUT=${OUT:-benchmarks}
  DEVICE=cuda SIZE=1024 ARCH=small REPEATS=10 WARMUP=3 ITERS=20 WINDOW=14 EXTRA=""
  "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || { echo "gpu_check.sh: no GPU visible to torch; run with --smoke for the CPU variant" >&2; exit 1; }
fi
WORK="$OUT/gpu_check_work"
mkdir -p "$OUT" "$WORK"
REPORT="$OUT/gpu.md"

# ---- 1. training steps of every backbone --------------------------------------------------------
specs=()
for model in 'PlainViT()' 'NaiveRecursiveViT()' 'SRViT()' 'ReViT()' 'EdgeRecViT()' 'MoRViT()'; do
  name=${model%%(*}
  for variant in global window window-cp; do
    case $variant in
      global) args="" ;;
      window) args=", window_size=$WINDOW" ;;
      window-cp) args=", window_size=$WINDOW, with_cp=True" ;;
    esac
    specs+=("$name-$variant=$name(arch=\"$ARCH\"$EXTRA$args)")
  done
done
dtype=bf16
[[ $SMOKE == 1 ]] && dtype=fp32  # the CPU smoke run checks the code path, not bf16 speed
"$PY" tools/analysis_tools/benchmark.py "${specs[@]}" --mode train --device "$DEVICE" --dtype "$dtype" \
  --size "$SIZE" --batch 1 --warmup "$WARMUP" --repeats "$REPEATS" --reference PlainViT-global --no-progress \
  --title "Training step at ${SIZE}x${SIZE}, $dtype: global vs window attention vs window + checkpointing" \
  --about "One training step per backbone (S): forward, backward and AdamW step in train mode. window = ${WINDOW}x${WINDOW} windows with global attention at the ends of the four stages (ViTDet); cp = activation checkpointing (with_cp)." \
  --out "$WORK/steps.md" --csv "$WORK/steps.csv" >/dev/null

# ---- 2. toy trainings on the device ---------------------------------------------------------------
data="$WORK/data"
if [[ $SMOKE == 1 ]]; then
  "$PY" tools/misc/make_toy_data.py --out "$data" --size 128 --coco-train 4 --coco-val 2 --ade-train 4 --ade-val 2 \
    --no-progress >/dev/null
else
  "$PY" tools/misc/make_toy_data.py --out "$data" --no-progress >/dev/null
fi
has_cuda_ops=$("$PY" -c 'from mmcv.ops import get_compiling_cuda_version as v; print(int(v() != "not available"))')
toy_rows=()
train_toy() {  # task, config
  local task=$1 config=$2 dir="$WORK/$1" start options
  options=$("$PY" -c "from mmrecvit.datasets import toy_data_cfg; print(' '.join(f'{k}={v}' for k, v in toy_data_cfg('$task', '$data').items()))")
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  (the options are space-separated key=value pairs)
  "$PY" tools/train.py "$config" --work-dir "$dir" --cfg-options train_cfg.max_iters="$ITERS" \
    train_cfg.val_interval=100000 default_hooks.checkpoint.interval=100000 default_hooks.logger.interval=1 \
    train_dataloader.num_workers=0 train_dataloader.persistent_workers=False $options >"$dir.log" 2>&1 \
    || { echo "gpu_check.sh: $task training failed, see $dir.log" >&2; tail -n 20 "$dir.log" >&2; exit 1; }
  local seconds
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  local last
  last=$(grep -h '"loss"' "$dir"/*/vis_data/scalars.json | tail -n 1)
  toy_rows+=("| $task | $(basename "$config" .py) | $ITERS | $seconds | $(sed -E 's/.*"loss": ([0-9.e+-]+).*/\1/' <<<"$last") | $(sed -E 's/.*"time": ([0-9.e+-]+).*/\1/' <<<"$last") |")
}
train_toy seg configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py
if [[ $DEVICE == cpu || $has_cuda_ops == 1 ]]; then
  train_toy det configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py
else
  toy_rows+=("| det | (skipped: mmcv has no CUDA ops here; scripts/setup.sh builds them on a GPU machine) | | | | |")
fi

{
  echo "# GPU check ($([[ $SMOKE == 1 ]] && echo 'CPU smoke run' || echo "$DEVICE"))"
  echo
  echo "Written by \`bash scripts/gpu_check.sh$([[ $SMOKE == 1 ]] && echo ' --smoke')\` on $(date -Iseconds)."
  echo
  cat "$WORK/steps.md"
  echo
  echo "## Toy trainings on the device"
  echo
  echo "| task | config | iterations | wall s (incl. start-up) | last loss | last s/iter |"
  echo "|---|---|---:|---:|---:|---:|"
  printf '%s\n' "${toy_rows[@]}"
} >"$REPORT"
echo "wrote $REPORT"
