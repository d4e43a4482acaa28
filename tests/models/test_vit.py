"""PlainViT and NaiveRecursiveViT (mmrecvit/models/vit.py): NaiveRecursiveViT's starts from a timm/DeiT
checkpoint (docs/methods/baselines.md); the shared properties are in test_common.py."""

import pytest
import torch
from backbone_cases import distance_to_deit
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.models import NaiveRecursiveViT
from mmrecvit.models.checkpoint import load_state_dict_into

pytestmark = pytest.mark.usefixtures('one_thread')

TINY = dict(embed_dim=32, num_heads=2, img_size=64)


def test_naive_cycle_init_is_deit_when_every_step_has_its_block(deit):
    vit, sd = deit
    assert distance_to_deit(NaiveRecursiveViT(**TINY, depth=12, num_blocks=12), vit, sd)[1] < 1e-5
    # with fewer blocks than steps: each block starts from the mean of the DeiT blocks of its steps
    cycle = NaiveRecursiveViT(**TINY, depth=12, num_blocks=3)
    load_state_dict_into(cycle, sd, 'deit')
    expected = torch.stack([sd[f'blocks.{i}.attn.qkv.weight'] for i in (1, 4, 7, 10)]).mean(0)
    torch.testing.assert_close(cycle.blocks[1].attn.qkv.weight, expected)


SMALL = dict(embed_dim=64, depth=4, num_heads=2, img_size=64)


def timm_vit(**kw):
    kw = {**SMALL, **kw}
    return VisionTransformer(
        img_size=kw['img_size'],
        patch_size=16,
        embed_dim=kw['embed_dim'],
        depth=kw['depth'],
        num_heads=kw['num_heads'],
        num_classes=10,
        dynamic_img_size=True,
    ).eval()


def save(obj, tmp_path, name='ckpt.pth'):
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


@pytest.mark.parametrize('mode', ['cycle', 'pick', 'average'])
def test_naive_recursive_shared_init(tmp_path, mode):
    """'cycle': unique block j <- the mean of the checkpoint blocks at the steps it runs (j, j + k, ...)."""
    ref = timm_vit(depth=6)
    model = NaiveRecursiveViT(
        **{**SMALL, 'depth': 6}, num_blocks=2, shared_init=mode, pretrained=save(ref.state_dict(), tmp_path)
    )
    model.init_weights()
    w = [ref.blocks[i].attn.qkv.weight for i in range(6)]
    expect = {
        'cycle': [(w[0] + w[2] + w[4]) / 3, (w[1] + w[3] + w[5]) / 3],
        'pick': [w[0], w[3]],
        'average': [sum(w[:3]) / 3, sum(w[3:]) / 3],
    }[mode]
    for j in range(2):
        torch.testing.assert_close(model.blocks[j].attn.qkv.weight, expect[j])
    if mode != 'cycle':
        with pytest.raises(ValueError, match='must be a multiple of 4'):
            NaiveRecursiveViT(
                **{**SMALL, 'depth': 6}, num_blocks=4, shared_init=mode, pretrained=save(ref.state_dict(), tmp_path)
            ).init_weights()
