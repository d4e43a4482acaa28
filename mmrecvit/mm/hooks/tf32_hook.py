"""`TF32Hook`: lets fp32 matrix products and convolutions use TensorFloat-32 on GPUs that have it
(mmengine has no switch for it); our configs list it."""

from __future__ import annotations

import torch
from mmengine.hooks import Hook

from ...models.checks import check_bool


class TF32Hook(Hook):
    """Allow (or forbid) TensorFloat-32 in fp32 matrix products and cuDNN convolutions, before the run.

    PyTorch computes fp32 matmuls in full fp32 by default (`torch.backends.cuda.matmul.allow_tf32 =
    False`; cuDNN convolutions already allow TF32), which on Ampere and later GPUs is several times
    slower than TF32's 10-bit-mantissa products with fp32 accumulation. The recipes we follow were
    trained with it (PyTorch before 1.12, of the ViTDet and ViT-Adapter papers' time, allowed TF32
    matmuls by default); under AMP it still concerns what runs in fp32: the fp32 parts of the heads,
    and the whole model in evaluation without autocast. mmengine has no switch for it,
    hence this hook; it sets both flags in `before_run` (process-wide, as PyTorch's flags are), a
    no-op on CPU. The routers' and rankers' products stay fp32-accurate under it (`models.numerics.RouterLinear`:
    three TF32 products of split operands where TF32 is allowed, the flag left as it is).

        custom_hooks = [..., dict(type='TF32Hook')]          # allow=False keeps full fp32
    """

    priority = 'VERY_HIGH'

    def __init__(self, allow: bool = True) -> None:
        self.allow = check_bool('TF32Hook allow', allow)

    def before_run(self, runner) -> None:
        torch.backends.cuda.matmul.allow_tf32 = self.allow
        torch.backends.cudnn.allow_tf32 = self.allow
