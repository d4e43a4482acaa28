"""Loading weights: timm parity, strictness, file formats, bad files (issue 2 §3, STYLE 6)."""

import logging

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from mmrecvit.models import PlainViT
from mmrecvit.models.checkpoint import CheckpointError, load_pretrained, read_checkpoint

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


def timm_block_outputs(model, x, indices):
    return model.forward_intermediates(x, indices=list(indices), norm=False, intermediates_only=True, output_fmt='NCHW')


def save(obj, tmp_path, name='ckpt.pth'):
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


def test_plainvit_s_reproduces_timm_vit_s_block_outputs(tmp_path):
    ref = VisionTransformer(embed_dim=384, depth=12, num_heads=6, num_classes=1000).eval()
    path = save(ref.state_dict(), tmp_path)
    model = PlainViT('small', pretrained=path).eval()
    model.init_weights()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ours, theirs = model(x), timm_block_outputs(ref, x, model.out_indices)
    for a, b in zip(ours, theirs):
        assert (a - b).abs().max() <= 1e-5


@pytest.mark.parametrize('wrap', ['raw', 'model', 'state_dict', 'ddp'])
def test_checkpoint_layouts_load_through_init_cfg(tmp_path, wrap):
    ref = timm_vit()
    sd = ref.state_dict()
    obj = {
        'raw': sd,
        'model': {'model': sd, 'epoch': 3},
        'state_dict': {'state_dict': sd, 'meta': {}},
        'ddp': {'state_dict': {f'module.{k}': v for k, v in sd.items()}},
    }[wrap]
    model = PlainViT(**SMALL, init_cfg=dict(type='Pretrained', checkpoint=save(obj, tmp_path))).eval()
    model.init_weights()
    x = torch.randn(2, 3, 80, 48)  # another grid: pos_embed resampled on the fly like timm's dynamic size
    with torch.no_grad():
        for a, b in zip(model(x), timm_block_outputs(ref, x, model.out_indices)):
            assert (a - b).abs().max() <= 1e-5


def test_backbone_prefix_from_a_detector_checkpoint(tmp_path):
    donor = PlainViT(**SMALL)
    sd = {f'backbone.{k}': v for k, v in donor.state_dict().items()}
    sd['neck.conv.weight'] = torch.zeros(1)
    model = PlainViT(
        **SMALL, init_cfg=dict(type='Pretrained', checkpoint=save({'state_dict': sd}, tmp_path), prefix='backbone.')
    )
    model.init_weights()
    for k, v in donor.state_dict().items():
        assert torch.equal(model.state_dict()[k], v)
    with pytest.raises(CheckpointError, match="no keys under prefix 'head.'"):
        load_pretrained(model, save({'state_dict': sd}, tmp_path, 'b.pth'), prefix='head')


def test_mismatched_keys_are_listed(tmp_path):
    sd = timm_vit().state_dict()
    sd.pop('blocks.1.attn.qkv.weight')
    sd['blocks.0.mlp.fc1.weight'] = torch.zeros(3, 3)
    sd['blocks.7.norm1.weight'] = torch.zeros(64)
    model = PlainViT(**SMALL)
    with pytest.raises(CheckpointError) as info:
        load_pretrained(model, save(sd, tmp_path))
    msg = str(info.value)
    for text in [
        'missing keys (1): blocks.1.attn.qkv.weight',
        'unexpected keys (1): blocks.7.norm1.weight',
        'wrong shapes (1): blocks.0.mlp.fc1.weight: checkpoint (3, 3) vs model (256, 64)',
    ]:
        assert text in msg


def test_no_silent_partial_load_through_init_weights(tmp_path):
    sd = PlainViT(**SMALL).state_dict()
    sd.pop('pos_embed')
    before = PlainViT(**SMALL)
    model = PlainViT(**SMALL, pretrained=save(sd, tmp_path))
    model.load_state_dict(before.state_dict())
    with pytest.raises(CheckpointError, match='missing keys \\(1\\): pos_embed'):
        model.init_weights()
    for k, v in before.state_dict().items():  # nothing was half-loaded
        assert torch.equal(model.state_dict()[k], v)


@pytest.mark.parametrize('content', [b'', b'not a checkpoint at all', 'truncated'])
def test_corrupt_files_give_a_clear_error(tmp_path, content):
    path = tmp_path / 'bad.pth'
    if content == 'truncated':
        torch.save(timm_vit().state_dict(), path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match='truncated, corrupt or not a PyTorch'):
        read_checkpoint(str(path))


def test_missing_file_and_non_tensor_state_dict(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        read_checkpoint(str(tmp_path / 'nope.pth'))
    with pytest.raises(CheckpointError, match='not tensors'):
        read_checkpoint(save({'state_dict': {'a': 1}}, tmp_path))


def test_pos_embed_of_another_grid_is_resampled_and_logged(tmp_path, caplog):
    ref = timm_vit(img_size=96)  # 6x6 grid -> model's 4x4
    model = PlainViT(**SMALL, pretrained=save(ref.state_dict(), tmp_path))
    with caplog.at_level(logging.INFO, logger='mmrecvit'):
        model.init_weights()
    assert 'resampled pos_embed from a 6x6 to a 4x4 grid' in caplog.text
    assert model.pos_embed.shape == (1, 17, 64)


def test_deit3_and_distilled_layouts(tmp_path, caplog):
    ref = timm_vit()
    sd = ref.state_dict()
    # DeiT III: positions for the grid only, CLS added without a position.
    deit3 = {**sd, 'pos_embed': sd['pos_embed'][:, 1:]}
    model = PlainViT(**SMALL, pretrained=save(deit3, tmp_path, 'd3.pth'))
    with caplog.at_level(logging.INFO, logger='mmrecvit'):
        model.init_weights()
    assert 'DeiT III layout' in caplog.text
    assert torch.equal(model.pos_embed[:, 0], torch.zeros_like(model.pos_embed[:, 0]))
    # Distilled DeiT: an extra token and position row, dropped.
    dist = {
        **sd,
        'dist_token': torch.zeros(1, 1, 64),
        'pos_embed': torch.cat([sd['pos_embed'][:, :1], torch.ones(1, 1, 64), sd['pos_embed'][:, 1:]], 1),
        'head_dist.weight': torch.zeros(10, 64),
        'head_dist.bias': torch.zeros(10),
    }
    model = PlainViT(**SMALL, pretrained=save(dist, tmp_path, 'dist.pth'))
    model.init_weights()
    torch.testing.assert_close(model.pos_embed, sd['pos_embed'])
