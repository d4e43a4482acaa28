"""Thin glue to timm: every backbone as a timm model in timm's model registry, with timm's classifier, feature
and weights APIs, so timm's scripts, Hugging Face transformers (`TimmBackbone`) and segmentation_models_pytorch
(`tu-` encoders) take them (docs/timm.md).

    import mmrecvit, timm
    model = timm.create_model('srvit_small_patch16_224', num_classes=100)

* `classifier.py`: `RecViTClassifier`, a backbone of ours with a linear head, timm's classifier API and its
  feature API (`forward_intermediates`, `feature_info`, `prune_intermediate_layers`) on the backbone's own;
* `entrypoints.py`: `register_timm_models`, run by `import mmrecvit`, registers every method x size of `METHODS`
  as `<method>_<size>_patch16_224`, built by timm's `build_model_with_cfg` (`features_only`, `pretrained`);
* `weights.py`: any checkpoint our backbones load, into the classifier, strictly (`pretrained_cfg_overlay`);
* `optim.py`: timm's layer-decay parameter groups with our recursion-aware lr scales.

The timm adapter, beside `mmrecvit.mm` (OpenMMLab) and `mmrecvit.d2` (detectron2): the networks
(`mmrecvit.models`) use timm's layers, but only this package touches timm's model registry. Imports
are absolute, so `import timm` here (and anywhere else) is timm itself, never this package.
"""

from .classifier import POOLS, RecViTClassifier
from .entrypoints import METHODS, build_classifier, register_timm_models
from .optim import param_groups_layer_decay

__all__ = [
    'METHODS',
    'POOLS',
    'RecViTClassifier',
    'build_classifier',
    'param_groups_layer_decay',
    'register_timm_models',
]
