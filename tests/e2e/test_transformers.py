"""Hugging Face transformers' `UperNetForSemanticSegmentation` on our backbone through its timm backbone config
(`TimmBackboneConfig`, the [hf] extra) trains on the toy ADE20K set and is evaluated (mIoU with mmseg's
`IoUMetric` arithmetic) before and after: the whole path a transformers user takes (docs/timm.md)."""

from pathlib import Path

import pytest
import torch
from torchvision.io import ImageReadMode, read_image

from mmrecvit.datasets import TOY_ADE_DIR
from mmrecvit.datasets.toy.ade import TOY_ADE_LABELS

pytest.importorskip('transformers')
VALUES = sorted(TOY_ADE_LABELS.values())  # ADE20K's label values of the toy classes -> classes 0..7; 0 is ignored
IGNORE = 255  # UperNetConfig's loss_ignore_index
STEPS = 20


def toy_ade(root: Path, split: str, mean, std) -> tuple[torch.Tensor, torch.Tensor]:
    """(images (N, 3, H, W) normalised, labels (N, H, W) in 0..7 or IGNORE) of a toy ADE20K split."""
    folder = Path(root) / TOY_ADE_DIR
    names = sorted((folder / 'images' / split).glob('*.jpg'))
    images = torch.stack([read_image(str(p), ImageReadMode.RGB) for p in names]).float() / 255
    images = (images - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    lut = torch.full((256,), IGNORE, dtype=torch.long)
    lut[VALUES] = torch.arange(len(VALUES))
    pngs = [folder / 'annotations' / split / f'{p.stem}.png' for p in names]
    labels = torch.stack([lut[read_image(str(p), ImageReadMode.UNCHANGED)[0].long()] for p in pngs])
    return images, labels


def miou(model, images, labels) -> float:
    from mmseg.evaluation import IoUMetric

    model.eval()
    with torch.no_grad():
        pred = model(pixel_values=images).logits.argmax(1)
    areas = [IoUMetric.intersect_and_union(p, t, len(VALUES), IGNORE) for p, t in zip(pred, labels)]
    totals = [sum(a[i] for a in areas) for i in range(4)]
    return float(torch.nanmean(torch.as_tensor(IoUMetric.total_area_to_metrics(*totals, ['mIoU'])['IoU'])))


def test_upernet_from_transformers_trains_and_evaluates_on_the_toy_ade20k_set(toy_root, deterministic_torch):
    from transformers import TimmBackboneConfig, UperNetConfig, UperNetForSemanticSegmentation

    torch.manual_seed(0)
    backbone = TimmBackboneConfig(backbone='morvit_tiny_patch16_224', out_indices=(2, 5, 8, 11))
    config = UperNetConfig(
        backbone_config=backbone,
        num_labels=len(VALUES),
        hidden_size=64,
        auxiliary_channels=32,
        use_auxiliary_head=False,
    )
    model = UperNetForSemanticSegmentation(config)
    data = model.backbone._backbone.pretrained_cfg  # the timm model's own mean / std
    train = toy_ade(toy_root, 'training', data['mean'], data['std'])
    val = toy_ade(toy_root, 'validation', data['mean'], data['std'])
    before = miou(model, *val)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    order = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(STEPS):
        model.train()
        batch = torch.randperm(len(train[0]), generator=order)[:4]
        loss = model(pixel_values=train[0][batch], labels=train[1][batch]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    after = miou(model, *val)
    assert sum(losses[-5:]) / 5 < 0.8 * losses[0], losses
    assert after > before + 0.1, (before, after)
