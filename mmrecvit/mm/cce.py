"""Edge-RecViT's confidence-modulated cross-entropy (CCE, paper 002; docs/methods/edge_recvit.md).

    model = dict(type='ConfidenceScaledClassifier', backbone=dict(type='EdgeRecViT', ...), head=dict(...))

The classifier's logits are scaled by the mean confidence of the image's depth decisions, `c = mean_i max_l p_il`
over its patch tokens (the EARR ranker's `confidence` token map, which keeps its graph), `Y_C = c * Y`, and the
head's own loss (cross-entropy, label smoothing, ...) is taken on `Y_C`: confident depth decisions keep the logits'
scale and lose less, uncertain ones flatten them and lose more, so the classification error reaches the ranker (its
main signal in the paper). Predictions are made from `Y_C` as well (the same argmax; the scores the model was
trained to give). The confidence is read from the statistics the backbone's output carries (`FeatureMaps.stats`);
mmpretrain's `ImageClassifier` otherwise, mixup/cutmix and all.
"""

from __future__ import annotations

from mmpretrain.models import ImageClassifier
from mmpretrain.registry import MODELS
from torch import Tensor


@MODELS.register_module()
class ConfidenceScaledClassifier(ImageClassifier):
    """`ImageClassifier` whose logits are scaled by the backbone's mean token confidence (module docstring)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        if not hasattr(self.head, '_get_loss') or not hasattr(self.head, '_get_predictions'):
            raise TypeError(f'ConfidenceScaledClassifier needs an mmpretrain ClsHead, got {type(self.head).__name__}')

    def scaled_logits(self, inputs: Tensor) -> Tensor:
        """(B, C) logits x the mean confidence of each image's tokens."""
        feats = self.backbone(inputs)
        stats = getattr(feats, 'stats', None)  # the forward's statistics travel with its maps (models/stats.py)
        logits = self.head(self.neck(feats) if self.with_neck else feats)
        confidence = None if stats is None else stats.token_maps.get('confidence')
        if confidence is None:
            raise KeyError(
                f'ConfidenceScaledClassifier: {type(self.backbone).__name__} gives no confidence token map '
                "(Edge-RecViT's ranker does); use ImageClassifier"
            )
        return logits * confidence.flatten(1).mean(1, keepdim=True).to(logits.dtype)

    def loss(self, inputs: Tensor, data_samples: list) -> dict:
        return self.head._get_loss(self.scaled_logits(inputs), data_samples)

    def predict(self, inputs: Tensor, data_samples: list | None = None, **kwargs) -> list:
        return self.head._get_predictions(self.scaled_logits(inputs), data_samples)
