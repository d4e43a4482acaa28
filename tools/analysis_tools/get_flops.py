"""Params and FLOPs of a detector/segmentor/classifier config, counting the tokens each block application
really processed.

    python tools/analysis_tools/get_flops.py configs/det/mask-rcnn_plainvit-s_fpn_1x_coco.py
    python tools/analysis_tools/get_flops.py CONFIG --shape 224 224 --per-step
    python tools/analysis_tools/get_flops.py CONFIG --image my.jpg --checkpoint work_dirs/x/iter_150.pth

The backbone is counted by its own analytic FLOP model (its forward result's `stats.work`: the work its forward
really did, so token-adaptive backbones are charged for the tokens they processed, next to the dense
count); the neck and heads by mmengine's counter (`FlopAnalyzer`, the base of mmdet's and mmseg's own
get_flops). For a static backbone mmengine's trace of the backbone is printed too and equals the
analytic count. See `mmrecvit/mm/complexity.py` for the exact rules.

Input: one real image (default: a toy val image of the config's framework from data/, written by
`make_toy_data` if absent) through the config's test pipeline and data preprocessor, batch 1;
`--shape H W` resizes it to exactly H x W instead. Token-adaptive models route by their weights:
pass `--checkpoint` for the numbers of a trained model (default: random initialisation).

Convention (`mmrecvit/models/flops.py`): FLOPs = 2 x multiply-accumulates of the matrix products, as
the papers count; mmdet's and mmseg's get_flops print GMACs (about half, plus norms).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from mmrecvit.inputs import bad_input, checkpoint_file, image_file, tool_parser
from mmrecvit.mm.complexity import FLOP_CONVENTION, ComplexityReport, count_complexity, format_report
from mmrecvit.mm.tooling import (
    add_cfg_options,
    add_shape_option,
    default_image,
    load_model,
    prepare_inputs,
    shape_arg,
)

REPO = Path(__file__).resolve().parents[2]  # the checkout of this tool; default images go to its data/


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser('tools/analysis_tools/get_flops.py', __doc__)
    parser.add_argument('config', help='mmdet, mmseg or mmpretrain config file')
    add_shape_option(parser, 'model input H [W] in pixels (default: the test pipeline applied to the image)')
    parser.add_argument('--per-step', action='store_true', help='also print one row per block application')
    parser.add_argument('--image', default=None, help='input image (default: a toy val image from data/)')
    parser.add_argument(
        '--checkpoint',
        default=None,
        help='weights: a whole-model checkpoint (tools/train.py) or a backbone/timm one '
        '(default: random initialisation)',
    )
    parser.add_argument('--seed', type=int, default=0, help='torch seed of the random initialisation (default 0)')
    parser.add_argument(
        '--no-trace',
        dest='trace',
        action='store_false',
        help='skip the cross-check trace of the whole backbone by mmengine',
    )
    add_cfg_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> ComplexityReport:
    parser = build_parser()
    args = parser.parse_args(argv)
    shape = shape_arg(parser, args.shape)
    with bad_input(parser.prog):  # a wrong file, argument or checkpoint: one line
        image = args.image and Path(image_file(args.image, '--image'))
        checkpoint = args.checkpoint and checkpoint_file(args.checkpoint, '--checkpoint', allow_none=False)
        cfg, scope, model, weights = load_model(args.config, checkpoint, args.cfg_options, args.seed)
    image = image or default_image(scope, REPO / 'data')
    data = prepare_inputs(model, cfg, image, shape)
    report = count_complexity(model, data, trace_backbone=args.trace)

    h, w = data['image'].shape[:2]
    how = f'resized to exactly {shape[0]}x{shape[1]}' if shape else 'the test pipeline'
    print(f'config : {args.config}')
    print(f'weights: {weights}')
    print(
        f'input  : {image} -> {how} -> {h}x{w} -> model input {"x".join(map(str, report.input_shape))} '
        '(after the data preprocessor)'
    )
    print(f'note   : {FLOP_CONVENTION}; per image\n')
    print(format_report(report, per_step=args.per_step), end='')
    bb = report.backbone
    if bb is not None and bb.flops < bb.dense_flops and args.checkpoint is None:
        print(
            '- the active-token count depends on the routing weights; these are randomly initialised '
            '(pass --checkpoint for a trained model)'
        )
    return report


if __name__ == '__main__':
    main()
