"""Training a classifier with a frozen teacher: mmpretrain's `ImageClassifier` plus distillation losses.

    custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.distill'], allow_failed_imports=False)
    model = dict(
        type='DistillImageClassifier',
        backbone=dict(type='ReViT', arch='small', out_type='cls_token'),
        head=dict(type='VisionTransformerClsHead', num_classes=1000, in_channels=384, ...),
        teacher=dict(source='timm', model='vit_base_patch16_224', checkpoint='checkpoints/deit_base.pth'),
        feature_loss_weight=1.0,   # reViT's distillation: MSE of the final post-norm tokens
        logit_loss_weight=1.0, logit_loss='soft', temperature=1.0)   # DeiT-style logit distillation

The teacher is built once from a local checkpoint (loaded weights-only and strictly), frozen
(`requires_grad=False`, always in eval mode, not in the optimizer, not in the student's
checkpoints: its weights are not part of `state_dict`) and run under `no_grad` on the same
(augmented) images as the student. One training loop, mmengine's: the distillation terms are
entries of the loss dict (`loss_distill_feature`, `loss_distill_logit`), summed and logged with the
rest. The student's own forward returns its backbone statistics (`forward_intermediates(return_stats=True)`),
so `loss` adds the backbone's auxiliary losses and scalars itself (as `RecursionHook` does for other models).

Teachers:
* `source='timm'`: `timm.create_model(model, num_classes=...)` with the checkpoint's weights; its
  features are `forward_features` (all final tokens after its norm), its logits `forward_head`.
* `source='mmpretrain'`: a config and checkpoint of an mmpretrain classifier (`mmpretrain.apis.get_model`);
  its features are its neck/backbone output (`extract_feat`, e.g. the CLS token), its logits its head's.

Feature loss (reViT's "final post-LN features"): the student's final normalised tokens, through a
learned linear projection to the teacher's width (`feature_proj`, part of the student), against the
teacher's: token for token when the teacher gives tokens (its patch grid resampled bilinearly to
the student's when they differ, prefix tokens matched by position), else the student's pooled
feature against the teacher's pooled one. Logit loss: 'soft' KL(student/T || teacher/T) T^2
(Hinton), or 'hard' cross-entropy to the teacher's argmax (DeiT's hard distillation, here on the
class head: our backbones have no distillation token).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from mmpretrain.models import ImageClassifier
from mmpretrain.registry import MODELS
from torch import Tensor, nn

from ..models import ViTBackbone
from ..models.checkpoint import CheckpointError, load_state_dict_strict, read_checkpoint
from ..models.checks import check_choice, check_float

SOURCES = ('timm', 'mmpretrain')
LOGIT_LOSSES = ('soft', 'hard')


def build_teacher(
    source: str, checkpoint: str, model: str | None = None, config: str | None = None, model_kwargs: dict | None = None
) -> nn.Module:
    """A frozen teacher in eval mode from a local checkpoint (see the module docstring)."""
    check_choice('teacher source', source, SOURCES)
    if source == 'timm':
        import timm  # only for timm teachers

        if model is None:
            raise ValueError("teacher=dict(source='timm', ...) needs model='<timm model name>'")
        teacher = timm.create_model(model, pretrained=False, **(model_kwargs or {}))
        load_state_dict_strict(teacher, read_checkpoint(checkpoint), f'teacher checkpoint {checkpoint}')
    else:
        from mmpretrain.apis import get_model  # only for mmpretrain teachers

        if config is None:
            raise ValueError("teacher=dict(source='mmpretrain', ...) needs config='<mmpretrain config>'")
        read_checkpoint(checkpoint)  # a clear error for a bad file before mmengine loads it
        teacher = get_model(config, pretrained=checkpoint, device='cpu')
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher.eval()


def token_mse(
    student: Tensor,
    teacher: Tensor,
    prefix: int,
    grid: tuple[int, int],
    teacher_model: nn.Module,
    image_hw: tuple,
    teacher_prefix: int | None = None,
) -> Tensor:
    """MSE of student tokens (B, N, D_t), already at the teacher's width, to a teacher's tokens: token for token, the
    teacher's patch grid resampled bilinearly to the student's `grid` when they differ, prefix tokens matched by
    position (module docstring). `teacher_prefix`: the teacher tokens' prefix (default the model's; 0 for
    intermediates without it)."""
    t_prefix = getattr(teacher_model, 'num_prefix_tokens', 0) if teacher_prefix is None else teacher_prefix
    patch = teacher_model.patch_embed.patch_size if hasattr(teacher_model, 'patch_embed') else None
    patch = patch if isinstance(patch, (tuple, list)) else (patch, patch)
    t_grid = (image_hw[0] // patch[0], image_hw[1] // patch[1]) if patch[0] else grid
    patches = teacher[:, t_prefix:]
    if t_grid != grid:
        # (B, n, D) -> (B, D, h_t, w_t) -> resampled to the student's grid -> (B, h*w, D)
        patches = patches.transpose(1, 2).reshape(teacher.shape[0], -1, *t_grid)
        patches = F.interpolate(patches, size=grid, mode='bilinear', align_corners=False)
        patches = patches.flatten(2).transpose(1, 2)
    shared = min(prefix, t_prefix)
    loss = F.mse_loss(student[:, prefix:], patches, reduction='sum')
    if shared:
        loss = loss + F.mse_loss(student[:, :shared], teacher[:, :shared], reduction='sum')
    return loss / (student[:, prefix:].numel() + student[:, :shared].numel())


@MODELS.register_module()
class DistillImageClassifier(ImageClassifier):
    """`ImageClassifier` whose `loss` adds distillation from a frozen teacher (module docstring).

    Args:
        teacher: `build_teacher` arguments: source ('timm' | 'mmpretrain'), checkpoint, model
            (timm name) or config (mmpretrain), model_kwargs (timm: e.g. num_classes, img_size).
        feature_loss_weight: weight of the feature MSE (0: off).
        logit_loss_weight: weight of the logit distillation (0: off).
        logit_loss: 'soft' (KL with `temperature`) or 'hard' (cross-entropy to the teacher's argmax).
        temperature: T of the soft logit loss.
        Other arguments: as `ImageClassifier` (the backbone must be one of ours).
    """

    def __init__(
        self,
        teacher: dict,
        feature_loss_weight: float = 1.0,
        logit_loss_weight: float = 1.0,
        logit_loss: str = 'soft',
        temperature: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(self.backbone, ViTBackbone):
            raise TypeError(f'DistillImageClassifier needs an mmrecvit backbone, got {type(self.backbone).__name__}')
        if not isinstance(teacher, dict):
            raise TypeError(
                f"teacher must be a dict like dict(source='timm', model=..., checkpoint=...), got {teacher!r}"
            )
        self.feature_loss_weight = check_float('feature_loss_weight', feature_loss_weight, 0.0, math.inf)
        self.logit_loss_weight = check_float('logit_loss_weight', logit_loss_weight, 0.0, math.inf)
        self.logit_loss = check_choice('logit_loss', logit_loss, LOGIT_LOSSES)
        self.temperature = check_float('temperature', temperature, 0.0, math.inf, low_open=True)
        # Not a submodule: the teacher stays out of the optimizer, state_dict, .train() and DDP.
        self.__dict__['teacher'] = build_teacher(**teacher)
        self.teacher_source = teacher['source']
        width = getattr(self.teacher, 'num_features', None) or self.teacher.head.in_channels
        self.feature_proj = nn.Linear(self.backbone.embed_dim, width) if self.feature_loss_weight else nn.Identity()

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> DistillImageClassifier:
        # .to()/.cuda()/.half() move the teacher with the student (it is not a registered submodule).
        self.teacher._apply(fn, *args, **kwargs)
        return super()._apply(fn, *args, **kwargs)

    @torch.no_grad()
    def _teacher_outputs(self, inputs: Tensor) -> tuple[Tensor, Tensor | None]:
        """(features, logits): tokens (B, N, D_t) or a pooled (B, D_t) feature; logits or None."""
        if self.teacher_source == 'timm':
            tokens = self.teacher.forward_features(inputs)
            logits = self.teacher.forward_head(tokens) if getattr(self.teacher, 'num_classes', 0) else None
            return tokens, logits
        feats = self.teacher.extract_feat(inputs)
        logits = self.teacher.head(feats) if getattr(self.teacher, 'with_head', False) else None
        feat = feats[-1]
        return (feat.flatten(2).transpose(1, 2) if feat.ndim == 4 else feat), logits

    def feature_loss(self, tokens: Tensor, teacher: Tensor, image_hw: tuple[int, int], grid: tuple[int, int]) -> Tensor:
        """MSE of the projected student features to the teacher's (module docstring); `grid`: the student's
        patch grid."""
        if teacher.ndim == 2:  # a pooled teacher feature: against the student's pooled one
            return F.mse_loss(self.feature_proj(self.backbone.pool(tokens)), teacher)
        return token_mse(
            self.feature_proj(tokens), teacher, self.backbone.num_prefix_tokens, grid, self.teacher, image_hw
        )

    def logit_loss_value(self, logits: Tensor, teacher: Tensor) -> Tensor:
        if self.logit_loss == 'hard':
            return F.cross_entropy(logits, teacher.argmax(-1))
        T = self.temperature
        return (
            F.kl_div(
                F.log_softmax(logits / T, -1), F.log_softmax(teacher / T, -1), reduction='batchmean', log_target=True
            )
            * T
            * T
        )

    def loss(self, inputs: Tensor, data_samples: list) -> dict:
        (tokens, _), stats = self.backbone.forward_intermediates(inputs, 1, output_fmt='NLC', return_stats=True)
        feats = (self.backbone.pool(tokens),)
        if self.with_neck:
            feats = self.neck(feats)
        losses = self.head.loss(feats, data_samples)
        t_feats, t_logits = self._teacher_outputs(inputs)
        if self.feature_loss_weight:
            losses['loss_distill_feature'] = self.feature_loss_weight * self.feature_loss(
                tokens, t_feats, tuple(inputs.shape[-2:]), stats.grid
            )
        if self.logit_loss_weight:
            if t_logits is None:
                raise CheckpointError(
                    'logit distillation needs a teacher with a classification head '
                    '(timm: num_classes > 0); set logit_loss_weight=0 for features only'
                )
            losses['loss_distill_logit'] = self.logit_loss_weight * self.logit_loss_value(self.head(feats), t_logits)
        for k, v in {**stats.aux_losses, **{k: v.detach() for k, v in stats.scalars.items()}}.items():
            if k in losses:
                raise KeyError(f'DistillImageClassifier: the backbone returns a loss named {k!r} the model has too')
            losses[k] = v
        return losses
