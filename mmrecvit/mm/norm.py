"""`LN2d`: LayerNorm over the channels of NCHW maps, a `norm_cfg` type for mmcv's `ConvModule`.

ViTDet puts LayerNorm in its feature pyramid and RoI heads (`norm="LN"` in detectron2). mmdet 3.3
and mmseg 1.2 register no such norm for conv features (mmdet's projects/ViTDet defines an `LN2d` of
its own outside the package, mmpretrain one in its own scope), so our ViTDet recipes use this one:
`norm_cfg=dict(type='LN2d', requires_grad=True)` in mmdet's `FPN`, `Shared4Conv1FCBBoxHead` and
`FCNMaskHead`. It is registered in mmengine's root `MODELS`, where mmcv registers its norms ('BN',
'GN', 'LN', ...), so every scope finds it; mmpretrain's and mmdet-project `LN2d`s live in their own
scopes and take precedence there.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class LN2d(nn.LayerNorm):
    """`nn.LayerNorm(C)` applied at every pixel of a (B, C, H, W) map.

    A subclass of `nn.LayerNorm`, so mmcv names it 'ln' and mmengine's `norm_decay_mult` finds it.
    The output is contiguous NCHW (unlike timm's `LayerNorm2d`, which returns a permuted view):
    mmcv's RoIAlign reads its input's memory as NCHW and would see scrambled features otherwise.
    """

    def forward(self, x: Tensor) -> Tensor:
        # (B, C, H, W) -> (B, H, W, C), normalised over C -> (B, C, H, W)
        x = F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2).contiguous()


NORM_LAYERS = {'LN2d': LN2d}
