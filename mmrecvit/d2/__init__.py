"""Thin glue to detectron2 (issue 21): our backbones as detectron2 `Backbone`s for LazyConfigs.

    from mmrecvit.d2 import SRViT, LayerFeaturePyramid, RecViTRCNN, optimizer_params

* `backbone.py`: every backbone of `mmrecvit.models.BACKBONES` as a detectron2 `Backbone` of the same
  name (registered in `BACKBONE_REGISTRY`), and `LayerFeaturePyramid`, detectron2's
  `SimpleFeaturePyramid` fed one layer's map per level;
* `rcnn.py`: `RecViTRCNN`, `GeneralizedRCNN` plus the backbones' auxiliary losses in the loss dict
  and their statistics in the `EventStorage`;
* `optim.py`: layer-wise lr decay with our recursion-aware layer depths, for
  `get_default_optimizer_params(lr_factor_func=...)`;
* `lazy.py`: `use_backbone`, a method's backbone file of configs/_base_/backbones/ in a LazyConfig;
* `checkpoint.py`: strict loading of mmdet / mmpretrain / timm checkpoints and export back; detectron2's
  checkpointer made to resample `pos_embed` and adapt input channels as every other load path does;
* `data.py`: the toy COCO set registered with `register_coco_instances`; `train.py`: the training
  and evaluation loop of `tools/d2_train_net.py`.

Only this package, and the benchmark harness's dry run of a LazyConfig recipe above it
(`mmrecvit/benchmark/dry_run_d2.py`), import detectron2; the networks (`mmrecvit.models`) stay framework-free.
"""

try:
    import detectron2  # noqa: F401
except ImportError as e:  # one clear message instead of a failure deep inside a config
    raise ImportError(
        'mmrecvit.d2 needs detectron2, which is not installed (it is not on the package index). Install it with '
        "the repository's set-up, `bash scripts/setup.sh`, or as detectron2's install guide says: "
        "`pip install --no-build-isolation 'git+https://github.com/facebookresearch/detectron2.git'`"
    ) from e

from .backbone import (
    D2_BACKBONES,
    EdgeRecViT,
    LayerFeaturePyramid,
    MoRViT,
    NaiveRecursiveViT,
    PlainViT,
    RecViTBackbone,
    ReViT,
    SRViT,
    StepFeaturePyramid,
)
from .checkpoint import apply_load_rules, export_backbone, load_backbone
from .data import register_toy_coco
from .lazy import use_backbone
from .optim import layer_decay_lr_factor, optimizer_params
from .rcnn import RecViTRCNN

apply_load_rules()  # detectron2's checkpointer resamples pos_embed, adapts in_channels (checkpoint.py)

__all__ = [
    'D2_BACKBONES',
    'EdgeRecViT',
    'LayerFeaturePyramid',
    'MoRViT',
    'NaiveRecursiveViT',
    'PlainViT',
    'ReViT',
    'RecViTBackbone',
    'RecViTRCNN',
    'SRViT',
    'StepFeaturePyramid',
    'export_backbone',
    'layer_decay_lr_factor',
    'load_backbone',
    'optimizer_params',
    'register_toy_coco',
    'use_backbone',
]
