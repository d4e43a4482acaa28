"""`SimplePyramid`: four stride-16 ViT maps -> a stride 4/8/16/32 pyramid (ViTDet-style, SPEC §5).

Each input map is first normalised (LayerNorm over channels, `norm_inputs=True`): the levels come
from different layers whose scales differ and drift during training, and unnormalised
ViT features made the toy Mask R-CNN diverge without gradient clipping. Level i is then rescaled by
`scale_factors[i]`:
  4   : ConvTranspose(D -> D/2, 2x2, s2) -> LayerNorm2d -> GELU -> ConvTranspose(D/2 -> D/4, 2x2, s2)
  2   : ConvTranspose(D -> D/2, 2x2, s2)
  1   : identity
  0.5 : max-pool 2x2, s2 (ceil mode)
  0.25: max-pool 4x4, s4 (ceil mode; for a stride-8 ViT, with scale factors (2, 1, 0.5, 0.25))
so the outputs have `out_channels_per_level = [D/4, D/2, D, D]` channels. The lateral/output
convolutions of ViTDet's pyramid are left to the next neck (mmdet's `FPN`) or head (mmseg's
`UPerHead`), which already have them.
"""

from __future__ import annotations

from collections.abc import Sequence

from timm.layers import LayerNorm2d
from torch import Tensor, nn

from .checks import check_bool, check_int, check_sequence, checked_keywords

_SCALES = (4, 2, 1, 0.5, 0.25)


class SimplePyramid(nn.Module):
    """Args:
    in_channels: D, the width of every input map.
    scale_factors: one rescaling per input map, each one of 4, 2, 1, 0.5, 0.25 (default (4, 2, 1, 0.5)).
    norm_inputs: LayerNorm2d on every input map before rescaling.
    """

    @checked_keywords  # a misspelt argument: one line naming the closest ones
    def __init__(
        self,
        in_channels: int,
        scale_factors: Sequence[float] = (4, 2, 1, 0.5),
        norm_inputs: bool = True,
        init_cfg: dict | None = None,
    ) -> None:
        super().__init__()
        D = check_int('in_channels', in_channels, 4)
        self.scale_factors = tuple(check_sequence('scale_factors', scale_factors))
        for s in self.scale_factors:
            if isinstance(s, bool) or s not in _SCALES:  # True == 1 would pass `in`
                raise ValueError(f'scale_factors entries must be in {list(_SCALES)}, got {s!r}')
        if D % 4:
            raise ValueError(f'in_channels must be divisible by 4 (the 4x level has D/4 channels), got {D}')
        if init_cfg is not None:
            raise ValueError(f'SimplePyramid has no pretrained weights: init_cfg must be None, got {init_cfg!r}')
        ops = {
            4: lambda: nn.Sequential(
                nn.ConvTranspose2d(D, D // 2, 2, 2),
                LayerNorm2d(D // 2),
                nn.GELU(),
                nn.ConvTranspose2d(D // 2, D // 4, 2, 2),
            ),
            2: lambda: nn.ConvTranspose2d(D, D // 2, 2, 2),
            1: nn.Identity,
            0.5: lambda: nn.MaxPool2d(2, 2, ceil_mode=True),  # ceil: a 1x1 map stays 1x1
            0.25: lambda: nn.MaxPool2d(4, 4, ceil_mode=True),
        }
        self.stages = nn.ModuleList(ops[s]() for s in self.scale_factors)
        norm = LayerNorm2d if check_bool('norm_inputs', norm_inputs) else (lambda _: nn.Identity())
        self.norms = nn.ModuleList(norm(D) for _ in self.scale_factors)
        width = {4: D // 4, 2: D // 2, 1: D, 0.5: D, 0.25: D}
        self.out_channels_per_level = [width[s] for s in self.scale_factors]

    def forward(self, inputs: Sequence[Tensor]) -> tuple[Tensor, ...]:
        if len(inputs) != len(self.stages):
            raise ValueError(
                f'SimplePyramid expects {len(self.stages)} input maps (one per scale factor '
                f'{list(self.scale_factors)}), got {len(inputs)}'
            )
        # timm's LayerNorm2d returns a channels-last view and convolutions keep that layout;
        # .contiguous() hands the next neck/head NCHW maps, which mmcv's RoIAlign requires
        # (it reads other layouts as scrambled features; see ViTBackbone.to_maps).
        return tuple(stage(norm(x)).contiguous() for stage, norm, x in zip(self.stages, self.norms, inputs))

    def init_weights(self) -> None:
        """Nothing to load; PyTorch's default init (kept so mmengine's init pass is explicit)."""
        self.is_init = True
