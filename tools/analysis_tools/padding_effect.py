"""Batch padding and MoR-ViT's expert-choice capacity: one image alone vs the same image padded into a batch.

    python tools/analysis_tools/padding_effect.py CONFIG CHECKPOINT [--num-images 8]

mmdet pads every image of a batch to the batch's largest size; expert choice keeps ceil(capacity * N)
of each image's N patch tokens, padding included (SPEC keeps the paper's rule). Each toy val image,
resized to a 256x160 portrait, runs alone (160 patch tokens) and zero-padded to 256x256 beside a
second image (256 tokens, 37.5 % padding); printed: the mean recursions of its real tokens both ways,
of the padding tokens, and the fraction of real tokens whose recursion count changed.
"""
from __future__ import annotations

import argparse
import glob

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from PIL import Image

import mmrecvit  # noqa: F401  (registration)
from mmrecvit.mm.tooling import build_model

MEAN = torch.tensor([123.675, 116.28, 103.53]).view(3, 1, 1)
STD = torch.tensor([58.395, 57.12, 57.375]).view(3, 1, 1)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='a toy det config of MoR-ViT')
    parser.add_argument('checkpoint', help="its trained checkpoint, or 'none' (random weights)")
    parser.add_argument('--num-images', type=int, default=8)
    parser.add_argument('--data-root', default='data/toy_coco')
    args = parser.parse_args(argv)
    init_default_scope('mmdet')
    model, _ = build_model(Config.fromfile(args.config), None if args.checkpoint == 'none' else args.checkpoint)
    backbone = model.backbone.eval()
    if type(backbone).__name__ != 'MoRViT':
        raise SystemExit(f'config: the backbone must be MoRViT, got {type(backbone).__name__}')
    rows = []
    for path in sorted(glob.glob(f'{args.data_root}/val2017/*.jpg'))[:args.num_images]:
        x = torch.from_numpy(np.array(Image.open(path).convert('RGB'))).permute(2, 0, 1).float()
        x = (F.interpolate(x[None], size=(256, 160), mode='bilinear')[0] - MEAN) / STD
        padded = torch.zeros(2, 3, 256, 256)
        padded[0, :, :, :160], padded[1] = x, torch.randn(3, 256, 256)  # mmdet pads with 0 after normalising
        with torch.no_grad():
            backbone(x[None])
            alone = backbone.stats.token_maps['recursions'][0].float()       # (16, 10)
            backbone(padded)
            in_batch = backbone.stats.token_maps['recursions'][0].float()    # (16, 16)
        real = in_batch[:, :10]
        rows.append([alone.mean(), real.mean(), in_batch[:, 10:].mean(), (real != alone).float().mean()])
    r = torch.tensor(rows).mean(0).tolist()
    result = dict(alone=r[0], padded_real=r[1], padding=r[2], changed=r[3])
    print(f'mean recursions of the real tokens: alone {r[0]:.3f}, padded in a batch {r[1]:.3f}; of the padding '
          f'tokens {r[2]:.3f}; real tokens whose recursion count changed: {100 * r[3]:.1f} % (padding: 37.5 %)')
    return result


if __name__ == '__main__':
    main()
