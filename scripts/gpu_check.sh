#!/usr/bin/env bash
# The GPU check, ready to run on a CUDA machine (about 5 minutes on one modern GPU):
#   1. every backbone (S) at 1024x1024 in bf16, one training step each (train mode, forward,
#      backward, AdamW step), side by side: global attention, window attention (14, global at
#      the stage ends: ViTDet), and window attention with activation checkpointing;
#   2. mmcv's ops as mmcv-lite gets them (mmrecvit/mm/mmcv_ext.py: torchvision's kernels, no nvcc): RoIAlign
#      forward and backward and NMS on the GPU against the CPU (fp32, and fp16 as AMP runs them), through mmcv's
#      own RoIAlign/nms when mmcv imports; it fails when they disagree or torchvision has no CUDA kernels;
#   3. the toy demo (tools/demo.py --task both: the toy Mask R-CNN, if mmcv's ops run on CUDA, and the toy
#      UperNet) trained for a few iterations, evaluated untrained and trained, and drawn, on the GPU. It needs
#      the OpenMMLab stack (mmengine, mmcv, mmdet, mmseg, mmpretrain and what they import: cv2, scipy,
#      matplotlib, ...); where a module is missing, the report says which and the other parts still run.
# It writes $OUT/gpu.md (default benchmarks/gpu.md). detectron2 is not needed.
#
#   bash scripts/gpu_check.sh            # on a GPU
#   bash scripts/gpu_check.sh --smoke    # the same code on the CPU at a tiny size (CI runs this)
#   PY=python3 bash scripts/gpu_check.sh # another Python than .venv's (mmrecvit importable: installed or PYTHONPATH)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
"$PY" -c 'import torch, torchvision, timm, mmrecvit' \
  || { echo "gpu_check.sh: $PY cannot import torch, torchvision, timm and mmrecvit (make setup, or set PY)" >&2; exit 1; }
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

# ---- 2. mmcv's ops on the device: torchvision's kernels behind mmcv-lite, against the CPU -------------------
"$PY" - "$DEVICE" >"$WORK/ops.md" <<'PY' || { echo "gpu_check.sh: the mmcv ops check failed (above)" >&2; exit 1; }
import sys, time
import torch, torchvision
import mmrecvit.mm  # noqa: F401  (first: with mmcv-lite it provides mmcv._ext)
from mmrecvit.mm import mmcv_ext

device = sys.argv[1]
g = torch.Generator().manual_seed(0)
feats = torch.randn(2, 64, 50, 60, generator=g)  # an FPN level at stride 8 of a 400x480 image
xy = torch.rand(300, 2, generator=g) * torch.tensor([540.0, 450.0]) - 30  # some boxes past the borders
rois = torch.cat([torch.randint(0, 2, (300, 1), generator=g).float(), xy, xy + torch.rand(300, 2, generator=g) * 150], 1)
grad_out = torch.randn(300, 64, 7, 7, generator=g)


def roi_align(dev, dtype, aligned=True, sampling_ratio=0, inputs=torch.float32):
    """The table's entry points, as mmcv's RoIAlignFunction calls them (inputs rounded to `inputs` first): output
    and input gradient."""
    x, r, go = (t.to(inputs).to(dev, dtype) for t in (feats, rois, grad_out))
    kw = dict(aligned_height=7, aligned_width=7, spatial_scale=1 / 8, sampling_ratio=sampling_ratio, pool_mode=1, aligned=aligned)
    out, grad, empty = x.new_zeros(300, 64, 7, 7), x.new_zeros(x.shape), x.new_zeros(0)
    with torch.autocast(dev, dtype=torch.float16, enabled=dtype == torch.float16):
        mmcv_ext.roi_align_forward(x, r, out, empty, empty, **kw)
    mmcv_ext.roi_align_backward(go, r, empty, empty, grad, **kw)
    return out.float().cpu(), grad.float().cpu()


rows, worst = [], 0.0
try:
    roi_align(device, torch.float32)
except (RuntimeError, NotImplementedError) as e:  # e.g. a CPU-only torchvision on a GPU machine
    sys.exit(f'torchvision {torchvision.__version__} cannot run RoIAlign on {device}: {str(e).splitlines()[0]}')
for dtype, tol in ((torch.float32, 1e-4), (torch.float16, 2e-3)):
    for aligned in (True, False):
        for sampling_ratio in (0, 2):
            ref = roi_align('cpu', torch.float32, aligned, sampling_ratio, inputs=dtype)  # the same rounded inputs
            got = roi_align(device, dtype, aligned, sampling_ratio)
            diff = [float((a - b).abs().max() / b.abs().max()) for a, b in zip(got, ref)]
            worst = max(worst, max(d / tol for d in diff))
            rows.append(f'| roi_align {str(dtype)[6:]} aligned={aligned} sampling_ratio={sampling_ratio} | '
                        f'{diff[0]:.1e} | {diff[1]:.1e} |')
boxes, scores = rois[:, 1:], torch.rand(300, generator=g)
keep = {dev: mmcv_ext.nms(boxes.to(dev), scores.to(dev), 0.5, 0).cpu() for dev in ('cpu', device)}
same = torch.equal(keep['cpu'], keep[device])
rows.append(f'| nms (300 boxes, IoU 0.5): the same {len(keep["cpu"])} boxes kept | {"yes" if same else "NO"} | |')
try:  # mmcv's own wrappers on the table (mmcv needs cv2 and the rest of the OpenMMLab stack)
    from mmcv.ops import RoIAlign, nms
except ImportError as e:
    rows.append(f'| mmcv.ops.RoIAlign / nms | not run: {e} | |')
else:
    x = feats.to(device).requires_grad_()
    out = RoIAlign(7, 1 / 8, 0, aligned=True)(x, rois.to(device))
    out.backward(grad_out.to(device))
    ref = roi_align(device, torch.float32)
    diff = [float((a.float().cpu() - b).abs().max() / b.abs().max()) for a, b in zip((out.detach(), x.grad.detach()), ref)]
    same = same and torch.equal(nms(boxes.to(device), scores.to(device), 0.5)[1].cpu(), keep['cpu'])
    worst = max(worst, max(diff) / 1e-5)  # the same kernels (CUDA's atomic adds may sum in another order)
    rows.append(f'| mmcv.ops.RoIAlign / nms on {device} = the table | {max(diff):.1e} | {"yes" if same else "NO"} |')
x, r = feats.to(device).requires_grad_(), rois.to(device)
for _ in range(3):  # warm-up, then one timed forward + backward
    torchvision.ops.roi_align(x, r, 7, 1 / 8, 0, True).sum().backward()
if device == 'cuda':
    torch.cuda.synchronize()
start = time.perf_counter()
torchvision.ops.roi_align(x, r, 7, 1 / 8, 0, True).sum().backward()
if device == 'cuda':
    torch.cuda.synchronize()
print(f'## mmcv ops on {device} (mmcv._ext from {mmcv_ext.backend() or "no mmcv"}: torchvision {torchvision.__version__}, '
      f'its CUDA {mmcv_ext.get_compiling_cuda_version()}; no nvcc)')
print()
print(f'Largest error on {device} relative to the largest value of the fp32 CPU result of the same inputs (fp16: AMP\'s '
      f'half inputs under autocast, against fp32 on them); RoIAlign of 300 boxes on a 2x64x50x60 map, forward + '
      f'backward {1000 * (time.perf_counter() - start):.1f} ms.')
print()
print('| op | forward | backward (nms: same boxes) |')
print('|---|---:|---:|')
print('\n'.join(rows))
if worst > 1 or not same:
    sys.exit(f'mmcv ops on {device} disagree with the CPU beyond tolerance (see {rows})')
PY

# ---- 3. the toy demo on the device: train, evaluate untrained and trained, draw ---------------------
# It needs the OpenMMLab stack; a machine without part of it still gets parts 1 and 2.
missing=$("$PY" -c 'import importlib.util
mods = ["mmengine", "mmcv", "mmdet", "mmseg", "mmpretrain", "cv2", "scipy", "matplotlib", "pycocotools", "shapely"]
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))')
if [[ -z "$missing" ]] && ! err=$("$PY" -c 'import mmrecvit.mm, mmdet.apis, mmseg.apis, mmpretrain.apis' 2>&1); then
  missing=$(tail -n 1 <<<"$err")
fi
if [[ -n "$missing" ]]; then
  echo "gpu_check.sh: the toy demo is skipped: not importable here: $missing" >&2
  toy_rows="| (skipped) | not importable with $PY: $missing | | | | | | |"
else
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
has_cuda_ops=$("$PY" -c 'import mmrecvit.mm; from mmcv.ops import get_compiling_cuda_version as v; print(int(v() != "not available"))')
task=both
if [[ $DEVICE == cuda && $has_cuda_ops == 0 ]]; then
  task=seg  # a compiled mmcv with CPU-only ops cannot run the detector on the GPU (mmcv-lite's torchvision ops can)
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
    print('| det | (skipped: the compiled mmcv here has CPU-only ops; make setup MMCV=lite uses torchvision\'s CUDA kernels) | | | | | | |')
PY
)
fi

{
  echo "# GPU check ($([[ $SMOKE == 1 ]] && echo 'CPU smoke run' || echo "$DEVICE"))"
  echo
  echo "Written by \`bash scripts/gpu_check.sh$([[ $SMOKE == 1 ]] && echo ' --smoke')\` on $(date -Iseconds)."
  echo
  cat "$WORK/steps.md"
  echo
  cat "$WORK/ops.md"
  echo
  echo "## The toy demo on the device (tools/demo.py: train, evaluate untrained and trained, draw)"
  echo
  echo "| task | config | iterations | train s | evaluate s | metric untrained -> trained | last loss | last s/iter |"
  echo "|---|---|---:|---:|---:|---|---:|---:|"
  echo "$toy_rows"
} >"$REPORT"
echo "wrote $REPORT"
