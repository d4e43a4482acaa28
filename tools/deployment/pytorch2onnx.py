"""Export a detector's backbone + neck, a whole segmentor or a classifier to ONNX, checked against PyTorch
in onnxruntime before the file is kept.

    python tools/deployment/pytorch2onnx.py configs/det/mask-rcnn_srvit-ti_fpn_1xb2-800it_toy-coco.py none \\
        --shape 256 256 --dynamic --out work_dirs/srvit-ti.onnx
    python tools/deployment/pytorch2onnx.py configs/seg/upernet_revit-ti_1xb4-150it_toy-ade20k-256x256.py \\
        work_dirs/x/iter_150.pth --shape 256 256 --revit-mode online

What is exported (`mmrecvit/deploy.py`): mmdet configs -> backbone + neck (input: the preprocessed image
(1, 3, H, W); outputs: the neck's maps); mmseg configs -> the segmentor in tensor mode (the decode
head's logits); mmpretrain configs -> the classifier's logits. The dynamo exporter is used
(`torch.onnx.export(..., dynamo=True)`); with `--dynamic` H and W are dynamic in multiples of
`--stride` (32: the coarsest map of the pyramid necks).

reViT (`--revit-mode`): 'fold' (default) exports the folded dense twin (`fold_to_plainvit`, what a
deployment runs: L plain blocks, no router); 'online' exports the reViT as configured (router and
expert merge in the graph). Edge-RecViT needs execution='masked' and MoR-ViT routing='expert_choice':
the other modes run data-dependent token counts and are refused with an error saying so. With --dynamic, the
segmentors' adaptive average pooling (UPerHead's pyramid pooling) is exported in a form exact at every size
(`mmrecvit.deploy.AdaptiveAvgPoolMatmul`); a module no dynamic graph computes (adaptive max pooling) is refused
before exporting, with the fixed-size command (mmseg's slide-inference crop when the config slides).

Parity: the file runs in onnxruntime (CPUExecutionProvider) next to PyTorch eager on random inputs at
the export size and, with --dynamic, at two other sizes (`--check-shapes` to choose); a table of max
|onnxruntime - eager| per output and size is printed. If any exceeds --tolerance (1e-4, fp32) nothing is
saved and the exit status is 1. The file is written next to --out under a temporary name and renamed on
success, with the mode a new file gets under the umask (as `open` would create it; 0644 under umask 022).
CHECKPOINT: a checkpoint (see tools/analysis_tools/get_flops.py) or `none` for random weights.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

import mmrecvit.deploy as deploy
from mmrecvit.inputs import bad_input, checkpoint_file, tool_parser
from mmrecvit.mm.tooling import add_cfg_options, load_model


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/deployment/pytorch2onnx.py', __doc__)
    parser.add_argument('config', help='mmdet, mmseg or mmpretrain config file')
    parser.add_argument('checkpoint', help="weights (whole model or backbone/timm), or 'none' for random weights")
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        required=True,
        metavar=('H', 'W'),
        help='export input size in pixels (multiples of --stride)',
    )
    parser.add_argument('--dynamic', action='store_true', help='dynamic H and W (multiples of --stride)')
    parser.add_argument('--stride', type=int, default=32, help='H and W are multiples of it (default 32)')
    parser.add_argument('--out', default=None, help='ONNX file (default: work_dirs/<config name>.onnx)')
    parser.add_argument(
        '--check-shapes',
        type=int,
        nargs='+',
        default=None,
        metavar='PX',
        help='parity sizes H1 W1 H2 W2 ... (default: the export size, plus two more with --dynamic)',
    )
    parser.add_argument(
        '--revit-mode',
        choices=deploy.REVIT_MODES,
        default='fold',
        help="reViT backbones: export folded to dense ('fold', default) or as configured ('online')",
    )
    parser.add_argument(
        '--tolerance',
        type=float,
        default=deploy.TOLERANCE,
        help=f'max |onnxruntime - eager| allowed (default {deploy.TOLERANCE:g})',
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of the random weights and inputs (default 0)')
    add_cfg_options(parser)
    return parser


def new_file_mode() -> int:
    """The mode `open()` gives a new file under this process's umask."""
    umask = os.umask(0)  # the only way to read it: set, then put back at once
    os.umask(umask)
    return 0o666 & ~umask


def fixed_size_command(args: argparse.Namespace, cfg) -> str:
    """The static export of this config: at mmseg's slide-inference crop (what its windows run at) if it slides,
    else at --shape."""
    test_cfg = cfg.model.get('test_cfg') or {}
    H, W = test_cfg['crop_size'] if test_cfg.get('mode') == 'slide' else args.shape
    return f'python tools/deployment/pytorch2onnx.py {args.config} {args.checkpoint} --shape {H} {W}'


def check_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[int, int]]:
    shape = tuple(args.shape)
    if args.check_shapes is None:
        sizes = deploy.default_check_sizes(shape, args.stride, args.dynamic)
    elif len(args.check_shapes) % 2:
        parser.error(f'--check-shapes takes pairs H W, got {len(args.check_shapes)} numbers')
    else:
        sizes = list(zip(args.check_shapes[::2], args.check_shapes[1::2]))
        if not args.dynamic and any(s != shape for s in sizes):
            parser.error(f'a static export runs only at --shape {shape[0]} {shape[1]}; pass --dynamic to check {sizes}')
    for H, W in [shape, *sizes]:
        if H % args.stride or W % args.stride or min(H, W) < 2 * args.stride:
            parser.error(
                f'sizes must be multiples of --stride {args.stride} and at least {2 * args.stride}, got {H}x{W}'
            )
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sizes = check_sizes(parser, args)
    with bad_input(parser.prog):  # a wrong file, argument or checkpoint: one line
        cfg, scope, model, weights = load_model(
            args.config, checkpoint_file(args.checkpoint), args.cfg_options, args.seed
        )
    folded = args.revit_mode == 'fold' and deploy.fold_revit_backbone(model)
    module = deploy.export_module(model, scope)
    try:
        deploy.check_exportable(module, args.dynamic)
    except ValueError as e:
        fixed = '' if not args.dynamic else f'; at a fixed size: {fixed_size_command(args, cfg)}'
        raise SystemExit(f'pytorch2onnx: {e}{fixed}') from e
    out = Path(args.out or Path('work_dirs') / (Path(args.config).stem + '.onnx'))
    out.parent.mkdir(parents=True, exist_ok=True)

    print(f'config : {args.config} ({scope}: {type(module).__name__} of {type(model).__name__})')
    print(f'weights: {weights}' + ('; reViT folded to dense' if folded else ''))
    print(
        f'export : 1x3x{args.shape[0]}x{args.shape[1]}, '
        + (f'dynamic H, W (multiples of {args.stride})' if args.dynamic else 'static')
    )
    fd, tmp = tempfile.mkstemp(suffix='.onnx.tmp', dir=out.parent)
    os.close(fd)
    try:
        x = torch.randn(1, 3, *args.shape, generator=torch.Generator().manual_seed(args.seed))
        deploy.export_onnx(module, x, tmp, args.stride, args.dynamic)
        rows = deploy.onnx_parity(module, tmp, sizes, seed=args.seed)
        print(deploy.format_parity(rows, args.tolerance))
        if not deploy.parity_ok(rows, args.tolerance):
            print(f'parity FAILED (tolerance {args.tolerance:g}): nothing saved', file=sys.stderr)
            return 1
        os.chmod(tmp, new_file_mode())  # mkstemp made it 0600, whatever the umask
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print(f'saved {out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
