"""Batch padding and the token-adaptive backbones: one image alone vs the same image padded into a batch.

    python tools/analysis_tools/padding_effect.py CONFIG CHECKPOINT [--num-images 8]

mmdet pads every image of a batch to the batch's largest size, and our token-adaptive backbones see the
padding as tokens (the papers' rules are kept):
* MoR-ViT expert choice keeps ceil(capacity * N) of each image's N patch tokens, padding included, so
  padding changes which real tokens recurse;
* Edge-RecViT's ranker sets each token's depth from that token alone, but its DU balance loss
  `L sum_l E_l A_l` averages over every patch token of the batch, padding included.
In both, a real token also changes because the position embedding is resampled to the padded grid
(16x16, not the image's own 16x10), as in every ViT backbone with absolute position embeddings.
Each toy val image, resized to a 256x160 portrait, runs alone (160 patch tokens) and zero-padded to
256x256 (256 tokens, 37.5 % padding, as mmdet pads after normalising). Printed: the mean recursions
(MoR-ViT) or depth (Edge-RecViT) of its real tokens both ways, of the padding tokens, the fraction of real
tokens whose count changed, and each auxiliary loss the backbone reports, alone and padded.
"""

from __future__ import annotations

import argparse
import glob

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.registry import init_default_scope
from PIL import Image

import mmrecvit.mm  # noqa: F401  (registration)
from mmrecvit.inputs import bad_input, checkpoint_file
from mmrecvit.mm.tooling import build_model, load_config

MEAN = torch.tensor([123.675, 116.28, 103.53]).view(3, 1, 1)
STD = torch.tensor([58.395, 57.12, 57.375]).view(3, 1, 1)
TOKEN_MAPS = {'MoRViT': 'recursions', 'EdgeRecViT': 'depth'}  # the per-token count each backbone reports


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        prog='tools/analysis_tools/padding_effect.py', description=__doc__.split('\n\n')[0]
    )
    parser.add_argument('config', help=f'a toy det config of {" or ".join(TOKEN_MAPS)}')
    parser.add_argument('checkpoint', help="its trained checkpoint, or 'none' (random weights)")
    parser.add_argument('--num-images', type=int, default=8)
    parser.add_argument('--data-root', default='data/toy_coco')
    args = parser.parse_args(argv)
    init_default_scope('mmdet')
    with bad_input(parser.prog):  # a wrong file, argument or checkpoint: one line
        model, _ = build_model(load_config(args.config), checkpoint_file(args.checkpoint))
    backbone = model.backbone.eval()
    name = type(backbone).__name__
    if name not in TOKEN_MAPS:
        raise SystemExit(f'config: the backbone must be one of {sorted(TOKEN_MAPS)}, got {name}')

    def run(x: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        with torch.no_grad():
            stats = backbone(x[None]).stats
        return stats.token_maps[TOKEN_MAPS[name]][0].float(), {k: float(v) for k, v in stats.aux_losses.items()}

    rows, losses = [], []
    for path in sorted(glob.glob(f'{args.data_root}/val2017/*.jpg'))[: args.num_images]:
        x = torch.from_numpy(np.array(Image.open(path).convert('RGB'))).permute(2, 0, 1).float()
        x = (F.interpolate(x[None], size=(256, 160), mode='bilinear')[0] - MEAN) / STD
        padded = torch.zeros(3, 256, 256)  # each image is computed on its own: the batch's other images do not matter
        padded[:, :, :160] = x
        alone, alone_losses = run(x)  # (16, 10)
        in_batch, padded_losses = run(padded)  # (16, 16)
        real = in_batch[:, :10]
        rows.append([alone.mean(), real.mean(), in_batch[:, 10:].mean(), (real != alone).float().mean()])
        losses.append(
            {
                **{f'{k}/alone': v for k, v in alone_losses.items()},
                **{f'{k}/padded': v for k, v in padded_losses.items()},
            }
        )
    r = torch.tensor(rows).mean(0).tolist()
    result = dict(alone=r[0], padded_real=r[1], padding=r[2], changed=r[3])
    result.update({k: float(np.mean([row[k] for row in losses])) for k in losses[0]})
    word = TOKEN_MAPS[name]
    print(
        f'{name}: mean {word} of the real tokens: alone {r[0]:.3f}, padded {r[1]:.3f}; of the padding tokens '
        f'{r[2]:.3f}; real tokens whose {word} changed: {100 * r[3]:.1f} % (padding: 37.5 % of the tokens)'
    )
    for key in sorted({k.rsplit('/', 1)[0] for k in losses[0]}):
        print(f'  {key}: alone {result[key + "/alone"]:.4f}, padded {result[key + "/padded"]:.4f}')
    return result


if __name__ == '__main__':
    main()
