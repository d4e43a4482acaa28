"""How close each backbone starts to DeiT's function when initialised from one timm/DeiT checkpoint.

    python tools/analysis_tools/init_distance.py deit_small_patch16_224-cd65a155.pth
    python tools/analysis_tools/init_distance.py timm:vit_small_patch16_224 --out docs/init_distance.md
    python tools/analysis_tools/init_distance.py timm:vit_small_patch16_224 --size 112 \
        --distilled configs/distill/revit-s_feature-distill_1xb8-100it_toy.py work_dirs/revit/iter_100.pth

Every backbone (and each of its initialisation choices, the default first) is built at the
checkpoint's width and depth and loaded from the same state dict through its own key map
(`convert_timm_state_dict`), before any training. For each, the last map it returns is compared
with DeiT's last block output on the same inputs (timm's `VisionTransformer` holding the same
weights; after DeiT's final norm for a backbone whose last map is normalised, Edge-RecViT's):

* mean per-token cosine similarity and mean per-token relative L2 error ||ours - DeiT|| / ||DeiT||,
  over the patch tokens,
* on toy val images (the embedded toy COCO set, resized, ImageNet mean/std) and on random N(0, 1)
  inputs.

CHECKPOINT: a timm/DeiT file, or `timm:NAME` for timm's randomly initialised model of that name
(nothing is downloaded; a stand-in where no pretrained file is at hand: its blocks barely change
the residual stream, so distances come out smaller than from trained weights).

--distilled CONFIG CHECKPOINT (repeatable): a feature-distillation recipe (configs/distill/, teacher CHECKPOINT above)
and its output. Its student is measured twice against the teacher's final normalised tokens (what it was distilled
to), both with its final norm: at its DeiT start (CHECKPOINT through its key map) and distilled (the output, strictly).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import timm
import torch
import torch.nn.functional as F
from PIL import Image
from tqdm import tqdm

from mmrecvit.datasets import TOY_COCO_DIR, make_toy_data
from mmrecvit.inputs import InputError, bad_input, checkpoint_file, tool_parser
from mmrecvit.mm.complexity import markdown_table
from mmrecvit.models import BACKBONES
from mmrecvit.models.checkpoint import (
    load_pretrained,
    load_state_dict_into,
    read_checkpoint,
    timm_architecture,
    timm_vit,
)
from mmrecvit.models.checks import closest

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def candidates(depth: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(backbone, initialisation, note, constructor kwargs) for an n-block checkpoint; defaults first."""
    full = dict(capacities=[1.0] * (depth - 2))
    return [
        ('PlainViT', 'block i <- block i', 'is DeiT', dict(depth=depth)),
        ('NaiveRecursiveViT k=3', "shared_init='cycle' (default)", '', dict(depth=depth, num_blocks=3)),
        (
            'NaiveRecursiveViT k=3',
            "shared_init='pick'",
            "the usual 'pick' mapping",
            dict(depth=depth, num_blocks=3, shared_init='pick'),
        ),
        ('NaiveRecursiveViT k=3', "shared_init='average'", '', dict(depth=depth, num_blocks=3, shared_init='average')),
        ('SRViT T=4', "router_init='function' (default)", '', dict(depth=depth)),
        ('SRViT T=4', "router_init='fresh'", 'uniform mixture', dict(depth=depth, router_init='fresh')),
        ('ReViT E=4', "router_init='programmed' (default)", '', dict(depth=depth)),
        ('ReViT E=4', "router_init='uniform'", "the paper's zero router", dict(depth=depth, router_init='uniform')),
        ('EdgeRecViT', 'head 0, shared n/2, tail n-1, DeiT norm (default)', "ranker's depths", dict(depth=depth)),
        ('EdgeRecViT', 'the same', 'every token at full depth', dict(depth=depth, depth_shift=depth - 1)),
        (
            'MoRViT',
            "router_alpha=1, router_init='open', capacities 1",
            'the COCO/ADE recipes',
            dict(num_recursions=depth - 2, router_alpha=1.0, **full),
        ),
        (
            'MoRViT',
            "router_alpha=1, router_init='open'",
            'default capacities',
            dict(num_recursions=depth - 2, router_alpha=1.0),
        ),
        (
            'MoRViT',
            "router_alpha=0.1, router_init='fresh'",
            "MoR's from-scratch gates",
            dict(num_recursions=depth - 2, router_init='fresh'),
        ),
    ]


def load_source(checkpoint: str, seed: int) -> dict[str, torch.Tensor]:
    if checkpoint.startswith('timm:'):
        name = checkpoint[len('timm:') :]
        if not timm.is_model(name):
            near = ', '.join(closest(name, timm.list_models())) or 'none'
            raise InputError(f'CHECKPOINT {checkpoint!r}: timm has no model {name!r}; closest: {near}')
        torch.manual_seed(seed)
        return timm.create_model(name, pretrained=False).state_dict()
    return read_checkpoint(checkpoint_file(checkpoint, allow_none=False))


def toy_images(count: int, size: int, data_root: Path) -> torch.Tensor:
    folder = data_root / TOY_COCO_DIR / 'val2017'
    if not folder.is_dir():
        make_toy_data(data_root, which=['coco'], progress=False)
    files = sorted(folder.glob('*.jpg'))[:count]
    mean, std = torch.tensor(IMAGENET_MEAN).view(3, 1, 1), torch.tensor(IMAGENET_STD).view(3, 1, 1)
    images = [
        torch.from_numpy(np.asarray(Image.open(f).convert('RGB').resize((size, size)), dtype=np.float32)) for f in files
    ]
    return (torch.stack(images).permute(0, 3, 1, 2) / 255.0 - mean) / std  # (B, H, W, 3) -> (B, 3, H, W)


def distance(ours: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """Mean per-token cosine and relative L2 error of (B, D, h, w) maps."""
    a, b = ours.flatten(2), ref.flatten(2)  # (B, D, h*w)
    cosine = F.cosine_similarity(a, b, dim=1).mean()
    rel = ((a - b).norm(dim=1) / b.norm(dim=1).clamp_min(1e-12)).mean()
    return float(cosine), float(rel)


@torch.no_grad()
def measure(
    sd: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], num_heads: int, progress: bool = True
) -> list[dict[str, Any]]:
    arch = timm_architecture(sd)
    ref = timm_vit(sd, num_heads)
    depth, sizes = arch['depth'], dict(embed_dim=arch['embed_dim'], num_heads=num_heads, img_size=arch['img_size'])
    refs = {}
    for name, x in inputs.items():
        last = ref.forward_intermediates(x, indices=[depth - 1], intermediates_only=True)[-1]
        tokens = ref.forward_features(x)[:, ref.num_prefix_tokens :]  # after the final norm
        refs[name] = dict(plain=last, norm=tokens.transpose(1, 2).reshape(last.shape))
    rows = []
    for backbone, init, note, kwargs in tqdm(candidates(depth), desc='init distance', disable=not progress):
        cls = BACKBONES[backbone.split(' ')[0]]
        model = cls(arch='small', **sizes, **kwargs).eval()
        load_state_dict_into(model, sd, f'the checkpoint into {backbone}')
        normed = getattr(model, 'norm', None) is not None and not isinstance(model.norm, torch.nn.Identity)
        row = dict(backbone=backbone, init=init, note=note)
        for name, x in inputs.items():
            row[name] = distance(model(x)[-1], refs[name]['norm' if normed else 'plain'])
        rows.append(row)
    return rows


@torch.no_grad()
def distilled_rows(
    pairs: Sequence[Sequence[str]], sd: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], num_heads: int
) -> list[dict[str, Any]]:
    """Each `--distilled` student at its DeiT start and distilled, against the teacher's final normalised tokens."""
    from mmengine.config import Config

    ref = timm_vit(sd, num_heads)
    refs = {}
    for name, x in inputs.items():
        ref.set_input_size(img_size=tuple(x.shape[-2:]))  # its positions resampled as the students' are
        tokens = ref.forward_features(x)[:, ref.num_prefix_tokens :]  # (B, h*w, D) after the final norm
        refs[name] = tokens.transpose(1, 2).reshape(x.shape[0], -1, x.shape[-2] // 16, x.shape[-1] // 16)
    rows = []
    for config, checkpoint in pairs:
        args = Config.fromfile(config).model.backbone.to_dict()
        cls = BACKBONES[args.pop('type')]
        args = {k: v for k, v in args.items() if k not in ('init_cfg', '_delete_', 'drop_path_rate')}
        for init, load in (
            ('its DeiT start (the teacher through its key map)', lambda m: load_state_dict_into(m, sd, 'the teacher')),
            (f'distilled: {Path(config).name}', lambda m, ckpt=checkpoint: load_pretrained(m, ckpt)),
        ):
            model = cls(**args).eval()
            load(model)
            row = dict(backbone=cls.__name__, init=init, note=checkpoint if 'distilled' in init else '')
            for name, x in inputs.items():
                row[name] = distance(model(x)[-1], refs[name])
            rows.append(row)
    return rows


def format_rows(rows: Sequence[dict[str, Any]], inputs: Sequence[str]) -> str:
    header = ['backbone', 'initialisation from DeiT', 'note']
    for name in inputs:
        header += [f'cosine ({name})', f'rel. L2 ({name})']
    body = []
    for r in rows:
        cells = [r['backbone'], r['init'], r['note']]
        for name in inputs:
            cells += [f'{r[name][0]:.4f}', f'{r[name][1]:.3f}']
        body.append(cells)
    return '\n'.join(markdown_table(header, body, 'lll' + 'rr' * len(inputs))) + '\n'


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = tool_parser('tools/analysis_tools/init_distance.py', __doc__)
    parser.add_argument('checkpoint', help='timm/DeiT checkpoint file, or timm:NAME for a random timm model')
    parser.add_argument('--num-heads', type=int, default=None, help='attention heads (default: width / 64, as DeiT)')
    parser.add_argument('--images', type=int, default=8, help='toy val images and random inputs each (default 8)')
    parser.add_argument('--size', type=int, default=None, help="input size (default: the checkpoint's)")
    parser.add_argument('--data-root', default='data', help='where the toy COCO set is (written if absent)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the random inputs and of timm:NAME weights')
    parser.add_argument('--out', default=None, help='also write the Markdown table to this file')
    parser.add_argument(
        '--distilled',
        nargs=2,
        action='append',
        default=[],
        metavar=('CONFIG', 'CHECKPOINT'),
        help='a feature-distillation recipe and its output: its student before and after (repeatable)',
    )
    args = parser.parse_args(argv)
    if args.images < 1:
        parser.error(f'--images must be >= 1, got {args.images}')
    with bad_input(parser.prog):  # a wrong file or an unknown timm model: one line
        sd = load_source(args.checkpoint, args.seed)
    arch = timm_architecture(sd)
    heads = args.num_heads or max(1, arch['embed_dim'] // 64)
    size = args.size or arch['img_size']
    gen = torch.Generator().manual_seed(args.seed)
    inputs = {
        'toy images': toy_images(args.images, size, Path(args.data_root)),
        'random inputs': torch.randn(args.images, 3, size, size, generator=gen),
    }
    if args.distilled:
        for config, checkpoint in args.distilled:
            for path in (config, checkpoint):
                if not Path(path).is_file():
                    parser.error(f'--distilled: no such file {path}')
        rows = distilled_rows(args.distilled, sd, inputs, heads)
    else:
        rows = measure(sd, inputs, heads)
    table = format_rows(rows, list(inputs))
    head = (
        f'checkpoint: {args.checkpoint} (width {arch["embed_dim"]}, {arch["depth"]} blocks, {heads} heads); '
        f'{args.images} toy val images and {args.images} random inputs at {size}x{size}\n\n'
    )
    print(head + table, end='')
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(head + table)
    return rows


if __name__ == '__main__':
    main()
