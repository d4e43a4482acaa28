# PlainViT-Ti from DeiT-Ti, ViT-Adapter's ADE20K UperNet recipe at ViT-Ti width: the iso-parameter reference of the
# shared-weight methods in the references family (docs/comparison.md). The first _base_: the recipe at Ti width; the
# second: the backbone (configs/_base_/backbones/plainvit-ti_deit.py).
_base_ = ['./_base_/upernet_vit-ti_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../_base_/backbones/plainvit-ti_deit.py']
model = dict(backbone=_base_.backbone)
# Its differences from PlainViT-S's recipe, for the references family (docs/comparison.md; in the Ti family it is the
# reference itself).
recipe = dict(
    _base_.backbone_recipe,
    differs={
        'model.backbone.arch': (
            'tiny',
            "the iso-parameter reference of the shared-weight methods (DeiT-Ti's parameters beside their 5.7-6.0 M)",
        ),
        'model.backbone.drop_path_rate': (0.1, "ViT-Adapter's 0.1 for ViT-T"),
        'model.neck.in_channels': (192, 'the pyramid at the ViT-Ti width'),
        'model.decode_head.in_channels': ([48, 96, 192, 192], "UperNet at the pyramid's ViT-Ti widths"),
        'model.auxiliary_head.in_channels': (192, 'the auxiliary head at the ViT-Ti width'),
        'start.checkpoint': ('deit_tiny_patch16_224-a1311bcf.pth', "DeiT's release at ViT-Ti: PlainViT's paper start"),
        'params': 'ViT-Ti: 192 wide, 3 heads',
        'gflops': 'ViT-Ti width',
        'gflops_paper': 'ViT-Ti width',
        'train_gflops': 'ViT-Ti width',
        'lr_scale': "the embeddings' share of the parameters at ViT-Ti (the same rate)",
    },
    measured=dict(gflops=20.9, gflops_paper=20.9, lr_scale=0.721, params=5.52, train_gflops=62.3),
)
