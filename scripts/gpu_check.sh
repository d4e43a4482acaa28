#!/usr/bin/env bash
# The GPU check, ready to run on a CUDA machine (about 5 minutes on one modern GPU):
#   1. every backbone (S) at 1024x1024 in bf16, one training step each (train mode, forward,
#      backward, AdamW step), side by side: global attention, window attention (14, global at
#      the stage ends: ViTDet), and window attention with activation checkpointing;
#   2. the toy demo (tools/demo.py --task both: the toy Mask R-CNN, if mmcv has CUDA ops, and the toy
#      UperNet) trained for a few iterations, evaluated untrained and trained, and drawn, on the GPU.
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

# ---- 2. the toy demo on the device: train, evaluate untrained and trained, draw ---------------------
# DATA: a folder that already holds the toy sets (tools/misc/make_toy_data.py --out DIR); else written here.
data=${DATA:-$WORK/data}
if [[ -z ${DATA:-} ]]; then
  if [[ $SMOKE == 1 ]]; then
    "$PY" tools/misc/make_toy_data.py --out "$data" --size 128 --coco-train 4 --coco-val 2 --ade-train 4 --ade-val 2 \
      --no-progress >/dev/null
  else
    "$PY" tools/misc/make_toy_data.py --out "$data" --no-progress >/dev/null
  fi
fi
has_cuda_ops=$("$PY" -c 'from mmcv.ops import get_compiling_cuda_version as v; print(int(v() != "not available"))')
task=both
if [[ $DEVICE == cuda && $has_cuda_ops == 0 ]]; then
  task=seg  # mmcv's RoIAlign/NMS need CUDA ops for the detector on the GPU
fi
"$PY" tools/demo.py --task "$task" --iters "$ITERS" --data-root "$data" --work-dir "$WORK/demo" >"$WORK/demo.log" 2>&1 \
  || { echo "gpu_check.sh: the toy demo failed, see $WORK/demo.log" >&2; tail -n 20 "$WORK/demo.log" >&2; exit 1; }
toy_rows=$("$PY" - "$WORK/demo" "$task" <<'PY'
import glob, json, os.path as osp, sys
work, task = sys.argv[1:]
metric = {'det': 'coco/bbox_mAP', 'seg': 'mIoU'}
pct = {'det': 100, 'seg': 1}  # every score in percent: mmdet's CocoMetric reports AP as a fraction
for t in (['det', 'seg'] if task == 'both' else [task]):
    r = json.load(open(osp.join(work, f'{t}_plainvit', 'scores.json')))
    (scalars,) = glob.glob(osp.join(r['log_dir'], 'vis_data', 'scalars.json'))
    last = [json.loads(line) for line in open(scalars) if '"loss"' in line][-1]
    print(f"| {t} | {osp.basename(r['config'])[:-3]} | {r['iters']} | {r['train_s']:.1f} | {r['eval_s']:.1f} | "
          f"{metric[t]} (%) {pct[t] * r['untrained'][metric[t]]:.1f} -> {pct[t] * r['trained'][metric[t]]:.1f} | "
          f"{last['loss']:.4f} | "
          f"{last['time']:.3f} |")
if task == 'seg':
    print('| det | (skipped: mmcv has no CUDA ops here; scripts/setup.sh builds them on a GPU machine) | | | | | | |')
PY
)

{
  echo "# GPU check ($([[ $SMOKE == 1 ]] && echo 'CPU smoke run' || echo "$DEVICE"))"
  echo
  echo "Written by \`bash scripts/gpu_check.sh$([[ $SMOKE == 1 ]] && echo ' --smoke')\` on $(date -Iseconds)."
  echo
  cat "$WORK/steps.md"
  echo
  echo "## The toy demo on the device (tools/demo.py: train, evaluate untrained and trained, draw)"
  echo
  echo "| task | config | iterations | train s | evaluate s | metric untrained -> trained | last loss | last s/iter |"
  echo "|---|---|---:|---:|---:|---|---:|---:|"
  echo "$toy_rows"
} >"$REPORT"
echo "wrote $REPORT"
