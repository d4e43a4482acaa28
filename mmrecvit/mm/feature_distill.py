"""Feature distillation without labels (issues 37.1, 45): a control start for every method, and reViT's own start.

    custom_imports = dict(imports=['mmrecvit.mm', 'mmrecvit.mm.feature_distill'], allow_failed_imports=False)
    model = dict(
        type='FeatureDistiller',
        backbone=dict(type='ReViT', arch='small', final_norm=True),
        teacher=dict(name='deit_small_patch16_224.fb_in1k',
                     checkpoint='checkpoints/deit_small_patch16_224-cd65a155.pth'),
        layers='pyramid')

What it is depends on the teacher. From DeiT (configs/distill/*-deit-*), the baseline itself, it is a DeiT-imitation
control: it asks a method to compute what PlainViT's start computes, so it can only bring a student towards PlainViT
(and is no start for a method that already represents DeiT: PlainViT, SR-ViT's function start). From a stronger
teacher (DINOv2, MAE, by timm name) it is how reViT's paper makes its distilled start (DINOv2, the final features).

The student is one of our backbones; the objective (`layers`):

* 'final': the MSE of its final normalised tokens (through `feature_head`, a linear map to the teacher's width where
  the widths differ, else none) to the frozen teacher's final normalised tokens (timm's `forward_features`), reViT's
  "final post-LN features" objective;
* 'pyramid': the layers the dense recipes' pyramid reads, the student's `out_indices`, each to the teacher's layer at
  the same relative depth (`rescaled_layers`: (2, 5, 8, 11) of 12 to a 12-layer teacher's (2, 5, 8, 11); SR-ViT's
  (3, 7, 9, 11) to its (3, 7, 9, 11)): the mean over the layers of the MSE of the layer-normalised (no affine) patch
  tokens (through `feature_head.<k>`, one per layer, where the widths differ), the teacher's normalised as FD's
  whitened targets (decision: the layers' scales differ; docs/pretraining.md).

The teacher's patch grid is resampled to the student's where they differ (`token_mse`, as `DistillImageClassifier`'s
feature loss). No labels: any image folder serves (mmpretrain's `CustomDataset(with_label=False)`). Its checkpoints
hold `backbone.*` (and `feature_head.*`, dropped as a head), so a dense recipe starts from one as from a classifier's
(configs/_base_/backbones/*_distill*.py).

Teachers are timm models by name (DeiT `deit_small_patch16_224.fb_in1k`, MAE `vit_base_patch16_224.mae`, DINOv2
`vit_base_patch14_dinov2.lvd142m`, ...), their released file loaded by timm itself from `checkpoint` (timm's own
filter maps the DeiT, MAE and DINOv2 releases; strictly, weights only), taking any input size; or, with
`stand_in_seed`, timm's random initialisation under that seed, a stand-in where no weights are at hand (the toys).
The teacher is frozen, in eval mode, outside the optimizer and the checkpoints. `init_from_teacher`: the student
starts from the teacher's weights through its own timm key map (its DeiT start, `docs/init_distance.md`).
"""

from __future__ import annotations

import difflib
import os
from typing import Any

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmpretrain.registry import MODELS
from torch import Tensor, nn

from ..models import ViTBackbone
from ..models.checkpoint import load_state_dict_into
from ..models.checkpoint_files import load_checkpoint_file
from ..models.checks import check_choice
from ..models.schedule import rescaled_layers
from .distill import token_mse

LAYERS = ('final', 'pyramid')  # the objectives (module docstring)
EXAMPLES = (
    "DeiT 'deit_small_patch16_224.fb_in1k', MAE 'vit_base_patch16_224.mae', DINOv2 'vit_base_patch14_dinov2.lvd142m'"
)


def fetch_command(name: str, checkpoint: str) -> str:
    """The command that puts timm's release of `name` at `checkpoint` (its URL, else its Hugging Face hub id)."""
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    if cfg is not None and cfg.url:
        return f'wget {cfg.url} -O {checkpoint}'
    hub = cfg.hf_hub_id if cfg is not None and cfg.hf_hub_id else f'timm/{name}'
    return f'huggingface-cli download {hub} model.safetensors --local-dir {os.path.dirname(checkpoint) or "."}'


def timm_teacher(
    name: str, checkpoint: str | None = None, stand_in_seed: int | None = None, img_size: int | None = None
) -> nn.Module:
    """A frozen timm teacher in eval mode without a classifier (module docstring)."""
    import timm  # only for timm teachers

    if not isinstance(name, str) or not timm.is_model(name) or ('.' in name and name not in timm.list_pretrained()):
        close = difflib.get_close_matches(str(name), timm.list_pretrained(), n=3, cutoff=0.5)
        raise ValueError(
            f'teacher {name!r} is not a timm model with released weights; closest: {close} (e.g. {EXAMPLES})'
        )
    # any input size, its positions resampled per forward as the student's (DINOv2's 518 grid at 224 crops, ...)
    kwargs = dict(num_classes=0, dynamic_img_size=True, **({} if img_size is None else dict(img_size=img_size)))
    if stand_in_seed is not None:
        if checkpoint is not None:
            raise ValueError(f'teacher {name!r}: pass checkpoint (its weights) or stand_in_seed (none), not both')
        torch.manual_seed(stand_in_seed)  # with its classifier, then dropped: the draws of init_distance's `timm:NAME`
        teacher = timm.create_model(name, pretrained=False, **{k: v for k, v in kwargs.items() if k != 'num_classes'})
        teacher.reset_classifier(0)
    else:
        if checkpoint is None or not os.path.isfile(checkpoint):
            path = checkpoint or f'checkpoints/{name}.pth'
            raise FileNotFoundError(
                f'teacher {name!r}: checkpoint {path!r} does not exist; make it with: {fetch_command(name, path)}'
            )
        load_checkpoint_file(checkpoint, mmap=True)  # one clear error for a bad file before timm reads it
        teacher = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=checkpoint), **kwargs)
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher.eval()


@MODELS.register_module()
class FeatureDistiller(BaseModel):
    """A backbone of ours trained to give a frozen teacher's features (module docstring).

    Args:
        backbone: the student, one of our backbones (its final norm on: `final_norm=True`).
        teacher: `timm_teacher` arguments: name, checkpoint or stand_in_seed, img_size (default: the data's).
        layers: 'final' (the final normalised tokens) or 'pyramid' (the layers its pyramid reads; module docstring).
        init_from_teacher: start the student from the teacher's weights (then the backbone has no init_cfg).
        data_preprocessor: mmpretrain's, e.g. `dict(type='ClsDataPreprocessor', mean=..., std=..., to_rgb=True)`.
    """

    def __init__(
        self,
        backbone: dict,
        teacher: dict,
        layers: str = 'final',
        init_from_teacher: bool = False,
        data_preprocessor: dict | None = None,
    ) -> None:
        super().__init__(data_preprocessor=data_preprocessor)
        self.backbone = MODELS.build(backbone)
        if not isinstance(self.backbone, ViTBackbone) or isinstance(self.backbone.norm, nn.Identity):
            raise ValueError(
                f'FeatureDistiller needs one of our backbones with its final norm (final_norm=True), got {backbone!r}'
            )
        if not isinstance(teacher, dict):
            raise TypeError(
                f"teacher must be a dict like dict(name='deit_small_patch16_224.fb_in1k', checkpoint=PATH), "
                f'got {teacher!r}'
            )
        if init_from_teacher and self.backbone.init_cfg is not None:
            raise ValueError(
                f'FeatureDistiller: init_from_teacher=True and the backbone has init_cfg={self.backbone.init_cfg}: '
                'pass one start (set the backbone init_cfg=None)'
            )
        self.layers = check_choice('FeatureDistiller layers', layers, LAYERS)
        self.init_from_teacher = bool(init_from_teacher)
        # Not a submodule: the teacher stays out of the optimizer, state_dict, .train() and DDP.
        self.__dict__['teacher'] = timm_teacher(**teacher)
        student, width = self.backbone.embed_dim, self.teacher.num_features
        project = lambda: nn.Identity() if width == student else nn.Linear(student, width)  # noqa: E731
        if self.layers == 'final':
            self.feature_head = project()
        else:  # the student's pyramid layers, each to the teacher's layer at its relative depth
            self.student_layers = tuple(self.backbone.out_indices)
            self.teacher_layers = rescaled_layers(self.student_layers, self.backbone.depth, len(self.teacher.blocks))
            self.feature_head = nn.ModuleList(project() for _ in self.student_layers)

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> FeatureDistiller:
        self.teacher._apply(fn, *args, **kwargs)  # .to()/.cuda() move the teacher with the student
        return super()._apply(fn, *args, **kwargs)

    def init_weights(self) -> None:
        super().init_weights()  # the backbone's init_cfg, if any
        if self.init_from_teacher:
            load_state_dict_into(self.backbone, self.teacher.state_dict(), f'the teacher {type(self.teacher).__name__}')

    def student_tokens(self, inputs: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """(B, 3, H, W) -> (the student's final normalised tokens (B, N, D), its patch grid)."""
        (tokens, _), stats = self.backbone.forward_intermediates(inputs, 1, output_fmt='NLC', return_stats=True)
        return tokens, tuple(stats.grid)

    def loss(self, inputs: Tensor) -> dict[str, Tensor]:
        hw = tuple(inputs.shape[-2:])
        if self.layers == 'final':
            tokens, grid = self.student_tokens(inputs)
            with torch.no_grad():
                target = self.teacher.forward_features(inputs)
            prefix = self.backbone.num_prefix_tokens
            return {
                'loss_distill_feature': token_mse(self.feature_head(tokens), target, prefix, grid, self.teacher, hw)
            }
        ours = self.backbone.forward_intermediates(
            inputs, list(self.student_layers), output_fmt='NLC', intermediates_only=True
        )
        with torch.no_grad():
            targets = self.teacher.forward_intermediates(
                inputs, indices=list(self.teacher_layers), output_fmt='NLC', intermediates_only=True
            )
        grid = self.backbone.patch_grid(inputs)
        norm = lambda x: F.layer_norm(x, x.shape[-1:])  # noqa: E731  (no affine: each layer's tokens whitened)
        losses = [
            token_mse(norm(head(s)), norm(t), 0, grid, self.teacher, hw, teacher_prefix=0)
            for head, s, t in zip(self.feature_head, ours, targets)
        ]
        return {'loss_distill_feature': sum(losses) / len(losses)}

    def forward(self, inputs: Tensor, data_samples: list | None = None, mode: str = 'tensor') -> Any:
        if mode == 'loss':
            return self.loss(inputs)
        if mode == 'tensor':
            return self.student_tokens(inputs)[0]
        raise ValueError(f"FeatureDistiller mode must be 'loss' or 'tensor' (it has no predictions), got {mode!r}")
