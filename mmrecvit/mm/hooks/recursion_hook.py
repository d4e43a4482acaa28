"""`RecursionHook`: our backbones' auxiliary losses and statistics in the model's loss dict.

mmdet's detectors and mmseg's segmentors build their loss dict in `loss()` from their heads only.
Before training starts this hook wraps that one method *on the model instance* (the class is
untouched) so that, after each forward, every mmrecvit backbone's `stats.aux_losses` (`loss_*`,
summed into the total loss by mmengine) and `stats.scalars` (logged, not summed) are added to the
dict. They then appear by name in the standard training log, for any detector or segmentor, with no
user code: our configs list the hook in `custom_hooks`. A backbone's `NonFiniteError` (NaN/inf
router logits or aux losses, `mmrecvit.models.numerics`) leaves the wrapped `loss()` with the
training iteration added to its message.
"""

from __future__ import annotations

from typing import Any

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from ...adapters import backbone_terms
from ...models import ViTBackbone
from ...models.numerics import NonFiniteError


def collect_backbone_outputs(model: Any) -> dict:
    """Aux losses (with graph) and detached scalars of every mmrecvit backbone in `model`, in one
    dict: mmengine sums the `loss*` entries and logs the rest."""
    losses, scalars = backbone_terms(model)
    return {**losses, **scalars}


class RecursionHook(Hook):
    """Add mmrecvit backbones' aux losses and statistics to the model's loss dict."""

    priority = 'NORMAL'

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        backbones = [m for m in model.modules() if isinstance(m, ViTBackbone)]
        if not backbones or getattr(model, '_mmrecvit_loss_wrapped', False):
            return
        original_loss = model.loss

        def loss_with_backbone_terms(*args: Any, **kwargs: Any) -> dict:
            try:
                losses = original_loss(*args, **kwargs)
            except NonFiniteError as e:
                raise NonFiniteError(f'{e}; at training iteration {runner.iter + 1}') from e
            for k, v in collect_backbone_outputs(model).items():
                if k in losses:
                    raise KeyError(f'RecursionHook: the model already returns a loss named {k!r}')
                losses[k] = v
            return losses

        model.loss = loss_with_backbone_terms
        model._mmrecvit_loss_wrapped = True
