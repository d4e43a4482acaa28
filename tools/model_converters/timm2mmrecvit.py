"""Convert a timm/DeiT ViT checkpoint into initial weights for one of our backbones (each method's
timm/DeiT start: docs/methods/).

    python tools/model_converters/timm2mmrecvit.py deit_small_patch16_224-cd65a155.pth out.pth \\
        --model 'SRViT(arch="small", num_recursions=4)'
    python tools/model_converters/timm2mmrecvit.py SRC DST --config configs/det/mask-rcnn_edgerecvit-s_fpn_1x_coco.py

SRC: a timm/DeiT checkpoint (raw state dict, DeiT's `{'model': ...}`, `.safetensors`). The target
backbone is `--model NAME(kw=literal, ...)` (a class of `mmrecvit.models.BACKBONES`) or the
`model.backbone` of `--config` (its `init_cfg` is ignored). Conversion is the model's own key map
(`convert_timm_state_dict`, through `mmrecvit.models.checkpoint.load_pretrained`: classifier dropped,
prefix tokens adapted, pos_embed resampled to the model's grid, **strict** load).

As HF's conversion scripts do, the result is checked before anything is written:

* parity, where the architecture computes DeiT: a twin of the target at the checkpoint's resolution
  (`PlainViT`: itself; `SRViT`: with T=1, which is DeiT exactly: docs/methods/srvit.md) is loaded from SRC, and
  its states after every block (PlainViT) or unit (SR-ViT) must match timm's `VisionTransformer`
  built with the same weights (`--tolerance`, relative to max(1, max |timm output|)); the target's
  tensors shared with the twin must then equal the twin's;
* otherwise (recursion that DeiT does not compute: reViT, Edge-RecViT, MoR-ViT, naive recursion)
  the strict load is the check.

DST holds `{'state_dict': <the backbone's state dict>, 'meta': {...}}`; after writing, a fresh model
built with `init_cfg=dict(type='Pretrained', checkpoint=DST)` is loaded through `init_weights()` and
compared with the converted one, so the file is known to work in a config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config
from torch import Tensor, nn

import mmrecvit.mm  # noqa: F401  (logging of the checkpoint filter goes to mmengine's logger)
from mmrecvit.benchmark import SpecError, parse_spec
from mmrecvit.inputs import bad_input, checkpoint_file, config_file, tool_parser
from mmrecvit.models import BACKBONES, PlainViT, SRViT
from mmrecvit.models.checkpoint import (
    CheckpointError,
    is_timm_state_dict,
    load_pretrained,
    read_checkpoint,
    timm_architecture,
    timm_vit,
)

IGNORED_BACKBONE_KEYS = ('type', 'init_cfg', 'pretrained')


def backbone_cfg(model: str | None, config: str | None) -> tuple[str, dict[str, Any]]:
    """(class name, constructor kwargs) from `--model SPEC` or a config's `model.backbone`."""
    if model is not None:
        spec = parse_spec(model)
        if spec.kind != 'backbone':
            raise SpecError(f'--model {model!r} must be a backbone class NAME(kw=...), got a {spec.kind} spec')
        name, kwargs = spec.target, dict(spec.kwargs)
    else:
        bb = Config.fromfile(config).model.backbone
        bb = bb.to_dict() if hasattr(bb, 'to_dict') else dict(bb)
        name, kwargs = str(bb['type']).split('.')[-1], bb
    if name not in BACKBONES:
        raise SpecError(f'unknown backbone {name!r}; registered: {sorted(BACKBONES)}')
    return name, {k: v for k, v in kwargs.items() if k not in IGNORED_BACKBONE_KEYS}


def parity_plan(model: nn.Module) -> tuple[dict[str, Any], list[int], list[int]] | None:
    """(twin kwargs overrides, our output indices, timm block indices) where the model computes DeiT."""
    if isinstance(model, SRViT):
        ends = [sum(model.unit_sizes[: u + 1]) - 1 for u in range(len(model.unit_sizes))]
        return dict(num_recursions=1, eval_recursions=None), ends, ends  # at T = 1 unit u ends at DeiT block ends[u]
    if isinstance(model, PlainViT):
        return {}, list(range(model.depth)), list(range(model.depth))
    return None


@torch.no_grad()
def check_parity(
    name: str, kwargs: dict[str, Any], target: nn.Module, src: str, sd: dict[str, Tensor], tolerance: float, seed: int
) -> str:
    """Run the parity check (module docstring); returns a one-line result, raises on failure."""
    plan = parity_plan(target)
    if plan is None:
        return f'{name} does not compute DeiT: no parity check, strict load only'
    arch = timm_architecture(sd)
    if arch['distilled']:
        return 'distilled DeiT checkpoint (its distillation token is dropped): no parity check, strict load only'
    overrides, ours_idx, timm_idx = plan
    twin = BACKBONES[name](**{**kwargs, **overrides, 'img_size': arch['img_size']}).eval()
    load_pretrained(twin, src)
    ref = timm_vit(sd, twin.num_heads)
    x = torch.randn(
        1, arch['in_chans'], arch['img_size'], arch['img_size'], generator=torch.Generator().manual_seed(seed)
    )
    ours = twin.forward_intermediates(x, ours_idx, intermediates_only=True)
    theirs = ref.forward_intermediates(x, indices=timm_idx, norm=False, intermediates_only=True, output_fmt='NCHW')
    worst = 0.0
    for i, a, b in zip(timm_idx, ours, theirs):
        err = float((a - b).abs().max()) / max(1.0, float(b.abs().max()))
        worst = max(worst, err)
        if err > tolerance:
            raise CheckpointError(f'parity failed after timm block {i}: relative max error {err:.3g} > {tolerance:g}')
    target_sd = target.state_dict()
    for k, v in twin.state_dict().items():
        if k in target_sd and target_sd[k].shape == v.shape and not torch.equal(target_sd[k], v):
            raise CheckpointError(f'{k} of the converted {name} differs from the parity-checked twin')
    what = 'block' if isinstance(target, PlainViT) else 'unit (T=1)'
    return (
        f'parity with timm VisionTransformer: {len(timm_idx)} {what} outputs {timm_idx}, relative max error '
        f'{worst:.2e} <= {tolerance:g}'
    )


def convert(
    src: str, dst: str, name: str, kwargs: dict[str, Any], tolerance: float = 1e-5, seed: int = 0
) -> dict[str, Any]:
    """Convert, check, write and re-load (module docstring); returns the `meta` written."""
    sd = read_checkpoint(src)
    if not is_timm_state_dict(sd):
        raise CheckpointError(
            f'{src} is not a timm/DeiT ViT checkpoint (keys like {sorted(sd)[:3]}); this tool '
            'converts timm/DeiT weights (our own checkpoints load directly through init_cfg)'
        )
    target = BACKBONES[name](**kwargs).eval()
    load_pretrained(target, src)  # the model's key map, strict
    parity = check_parity(name, kwargs, target, src, sd, tolerance, seed)
    meta = dict(
        source=str(src),
        model=name,
        kwargs=repr(kwargs),
        check=parity,
        params=sum(p.numel() for p in target.parameters()),
    )
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    torch.save({'state_dict': target.state_dict(), 'meta': meta}, dst)
    fresh = BACKBONES[name](**kwargs, init_cfg=dict(type='Pretrained', checkpoint=str(dst)))
    fresh.init_weights()
    for k, v in fresh.state_dict().items():
        if not torch.equal(v, target.state_dict()[k]):
            Path(dst).unlink()
            raise CheckpointError(f'{dst} does not re-load into {name} through init_cfg ({k} differs); removed')
    return meta


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = tool_parser('tools/model_converters/timm2mmrecvit.py', __doc__)
    parser.add_argument('src', help='timm/DeiT checkpoint')
    parser.add_argument('dst', help='output file (a state dict for init_cfg=dict(type="Pretrained", ...))')
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument('--model', help='backbone spec, e.g. \'SRViT(arch="small", num_recursions=4)\'')
    target.add_argument('--config', help='a config whose model.backbone is the target')
    parser.add_argument('--tolerance', type=float, default=1e-5, help='parity tolerance (default 1e-5)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the random parity input')
    args = parser.parse_args(argv)
    with bad_input(parser.prog):  # a wrong file, backbone argument or checkpoint: one line
        src = checkpoint_file(args.src, 'SRC', allow_none=False)
        try:
            name, kwargs = backbone_cfg(args.model, args.config and config_file(args.config, '--config'))
        except SpecError as e:
            parser.error(str(e))
        meta = convert(src, args.dst, name, kwargs, args.tolerance, args.seed)
    print(f'{name}({", ".join(f"{k}={v!r}" for k, v in kwargs.items())}): {meta["params"] / 1e6:.2f}M parameters')
    print(f'check: {meta["check"]}')
    print(f'wrote {args.dst} (re-loaded strictly through init_cfg=dict(type="Pretrained", checkpoint=...))')
    return meta


if __name__ == '__main__':
    main()
