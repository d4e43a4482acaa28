"""Thin glue to timm: every backbone as a timm image classifier in timm's model registry.

    import mmrecvit, timm
    model = timm.create_model('srvit_small_patch16_224', num_classes=100)

* `classifier.py`: `RecViTClassifier` (a backbone of ours with a linear head and timm's classifier
  API) and `register_timm_models`, run by `import mmrecvit`, which registers every method x size of
  `METHODS` as `<method>_<size>_patch16_224`.

The timm adapter, beside `mmrecvit.mm` (OpenMMLab) and `mmrecvit.d2` (detectron2): the networks
(`mmrecvit.models`) use timm's layers, but only this package touches timm's model registry. Imports
are absolute, so `import timm` here (and anywhere else) is timm itself, never this package.
"""

from .classifier import METHODS, POOLS, RecViTClassifier, build_classifier, register_timm_models

__all__ = ['METHODS', 'POOLS', 'RecViTClassifier', 'build_classifier', 'register_timm_models']
