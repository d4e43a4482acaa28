"""Fold a reViT checkpoint into a dense `PlainViT` checkpoint with L blocks (docs/methods/revit.md, "fold").

    python tools/model_converters/fold_revit.py CHECKPOINT --depth L OUT [--config CFG | --num-heads H]

CHECKPOINT is either a reViT backbone state dict (our keys) or an mmengine training checkpoint of a
detector/segmentor (`state_dict` with `backbone.` keys). Block t of the folded model holds the shared
attention and norms and the merged FFN of depth coordinate t/(L-1); every other key (neck, heads)
and the checkpoint's `meta` are kept, so the output works with the same config after its backbone is
replaced by the `PlainViT` dict this tool prints. Optimizer/scheduler state is dropped (it belongs to
the reViT parameters), and so is `meta['cfg']` (the config text of the unfolded model).

The architecture comes from `--config` (its `model.backbone`), or is inferred from the tensor shapes
(D, E, hidden width, patch, grid, LayerScale, biases) with the head count from `--num-heads` or the
DeiT size table (192/384/768 -> 3/6/12). As in HF conversion scripts, the folded backbone is checked
against the reViT on a random input before anything is written (`--tolerance`, default 1e-5 relative
to max(1, max |output|)), and the stored parameter counts of both are printed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch
from mmengine.config import Config
from torch import Tensor

from mmrecvit.inputs import InputError, bad_input, checkpoint_file, config_file
from mmrecvit.models import PlainViT
from mmrecvit.models.arguments import ARCH_SETTINGS
from mmrecvit.models.checkpoint import load_state_dict_strict, select_prefix
from mmrecvit.models.checkpoint_files import load_checkpoint_file, unwrap_state_dict
from mmrecvit.models.revit import ReViT
from mmrecvit.models.revit_fold import fold_to_plainvit, plainvit_config

PREFIX = 'backbone.'


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='tools/model_converters/fold_revit.py',
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('checkpoint', help='reViT backbone state dict or mmengine checkpoint (backbone.* keys)')
    parser.add_argument('--depth', type=int, required=True, help='L: number of blocks of the folded ViT (>= 2)')
    parser.add_argument('out', help='where to write the folded checkpoint')
    parser.add_argument('--config', help='mmdet/mmseg config whose model.backbone is the reViT (else inferred)')
    parser.add_argument('--num-heads', type=int, help='attention heads, when inferring a non-DeiT width')
    parser.add_argument(
        '--out-indices',
        type=int,
        nargs='+',
        help='output layers (0..depth-1) when inferring (default: the stage ends of --depth)',
    )
    parser.add_argument('--tolerance', type=float, default=1e-5, help='parity tolerance (default 1e-5)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the random parity input')
    args = parser.parse_args(argv)
    if args.depth < 2:
        parser.error(f'--depth must be an int >= 2, got {args.depth}')
    if args.config and (args.num_heads or args.out_indices):
        parser.error('--num-heads/--out-indices are for inferring the architecture; with --config edit the config')
    return args


def read_full(path: str) -> tuple[object, dict[str, Tensor]]:
    """The checkpoint object (to keep its `meta`; None for safetensors) and its flat state dict, through
    the one checkpoint reader (weights only, one error naming a bad file)."""
    obj = load_checkpoint_file(path)
    return (None if path.endswith('.safetensors') else obj), unwrap_state_dict(obj, path)


def revit_kwargs_from_state_dict(sd: dict[str, Tensor], num_heads: int | None) -> dict:
    """ReViT constructor arguments recovered from the shapes of its state dict."""
    missing = [
        k for k in ('pos_embed', 'patch_embed.proj.weight', 'block.mlp.fc1.weight', 'router.fc1.weight') if k not in sd
    ]
    if missing:
        raise SystemExit(f'not a reViT backbone state dict: missing {missing}; keys look like {sorted(sd)[:5]}')
    embed_dim = sd['pos_embed'].shape[-1]
    num_experts, hidden, _ = sd['block.mlp.fc1.weight'].shape
    _, in_channels, patch, _ = sd['patch_embed.proj.weight'].shape
    with_cls_token = 'cls_token' in sd
    grid_tokens = sd['pos_embed'].shape[1] - int(with_cls_token)
    grid = math.isqrt(grid_tokens)
    if grid * grid != grid_tokens or int(embed_dim * (hidden / embed_dim)) != hidden:
        raise SystemExit('cannot infer the architecture (non-square pos_embed grid or MLP width): pass --config')
    if num_heads is None:
        by_width = {s['embed_dim']: s['num_heads'] for s in ARCH_SETTINGS.values()}
        if embed_dim not in by_width:
            raise SystemExit(
                f'cannot infer num_heads for embed_dim={embed_dim} (DeiT widths: {sorted(by_width)}): '
                'pass --num-heads or --config'
            )
        num_heads = by_width[embed_dim]
    return dict(
        embed_dim=embed_dim,
        num_heads=num_heads,
        num_experts=num_experts,
        mlp_ratio=hidden / embed_dim,
        patch_size=patch,
        img_size=grid * patch,
        in_channels=in_channels,
        with_cls_token=with_cls_token,
        qkv_bias='block.attn.qkv.bias' in sd,
        router_hidden_dim=sd['router.fc1.weight'].shape[0],
        init_values=1.0 if 'block.ls1.gamma' in sd else None,
    )  # LayerScale values come from the checkpoint


def build_revit(args: argparse.Namespace, sd: dict[str, Tensor]) -> ReViT:
    if args.config:
        backbone = Config.fromfile(args.config).model.backbone.to_dict()
        if backbone.pop('type', None) not in ('ReViT', 'mmrecvit.ReViT'):
            raise SystemExit(f'{args.config}: model.backbone is not a ReViT')
        for key in ('pretrained', 'init_cfg'):
            backbone.pop(key, None)
        revit = ReViT(**backbone)  # as configured, then at --depth: its out_indices move to the same relative depths
        revit.depth = args.depth
        return revit
    return ReViT(
        arch='small', depth=args.depth, out_indices=args.out_indices, **revit_kwargs_from_state_dict(sd, args.num_heads)
    )


@torch.no_grad()
def check_parity(revit: ReViT, dense: PlainViT, tolerance: float, seed: int) -> float:
    """Max |reViT - folded| over all outputs on a random image batch; raises if over tolerance."""
    gen = torch.Generator().manual_seed(seed)
    h, w = (g * revit.patch_size for g in revit.pretrain_grid)
    x = torch.randn(2, revit.patch_embed.proj.in_channels, h, w, generator=gen)
    ref, out = revit.eval()(x), dense.eval()(x)
    diff = max((a - b).abs().max().item() for a, b in zip(ref, out))
    scale = max(1.0, max(a.abs().max().item() for a in ref))
    if len(ref) != len(out) or not diff <= tolerance * scale:
        raise SystemExit(
            f'parity check failed: max |reViT - folded PlainViT| = {diff:.3g} > {tolerance:g} x '
            f'{scale:.3g}; nothing written'
        )
    return diff


def count(sd: dict[str, Tensor]) -> str:
    n = sum(v.numel() for v in sd.values())
    return f'{n:,} ({n / 1e6:.2f}M)'


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with bad_input('tools/model_converters/fold_revit.py'):  # a wrong file, argument or checkpoint: one line
        args.config = args.config and config_file(args.config, '--config')
        obj, flat = read_full(checkpoint_file(args.checkpoint, allow_none=False))
        is_model_ckpt = any(k.startswith(PREFIX) for k in flat)
        backbone_sd = select_prefix(flat, PREFIX, args.checkpoint) if is_model_ckpt else flat
        try:
            revit = build_revit(args, backbone_sd)
        except SystemExit as e:  # the architecture cannot be read from the file: say which file
            raise InputError(f'{args.checkpoint}: {e.code}') from e
        load_state_dict_strict(revit, backbone_sd, args.checkpoint)
    revit.eval()

    dense = fold_to_plainvit(revit, args.depth)
    diff = check_parity(revit, dense, args.tolerance, args.seed)
    folded_sd = dense.state_dict()
    config = {'type': 'PlainViT', **plainvit_config(revit, args.depth)}
    if is_model_ckpt:
        state_dict = {k: v for k, v in flat.items() if not k.startswith(PREFIX)}
        state_dict.update({PREFIX + k: v for k, v in folded_sd.items()})
        meta = obj.get('meta') if isinstance(obj, dict) and isinstance(obj.get('meta'), dict) else {}
        meta = {k: v for k, v in meta.items() if k != 'cfg'}
        meta['revit_fold'] = dict(source=os.path.abspath(args.checkpoint), depth=args.depth, backbone=config)
        out_obj: object = dict(meta=meta, state_dict=state_dict)
    else:
        out_obj = folded_sd
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.save(out_obj, args.out)

    print(
        f'parity: max |reViT - folded PlainViT| = {diff:.3g} over {len(revit.out_indices)} outputs '
        f'(tolerance {args.tolerance:g})'
    )
    print(
        f'stored parameters: reViT backbone {count(backbone_sd)}, E={revit.num_experts} experts; '
        f'folded PlainViT backbone {count(folded_sd)}, {args.depth} blocks'
    )
    print(
        f'wrote {args.out}; use it with the same config and this backbone (`_delete_=True` when it overrides '
        'an inherited one):'
    )
    print('model.backbone = dict(' + ', '.join(f'{k}={v!r}' for k, v in config.items()) + ')')
    return 0


if __name__ == '__main__':
    sys.exit(main())
