# PlainViT-Ti from DeiT-Ti, ViTDet's COCO recipe (LSJ 1024, 100 epochs) at ViT-Ti width: the iso-parameter reference
# of the shared-weight methods in the references family (docs/comparison.md). The first _base_: the recipe at Ti width;
# the second: the backbone (configs/_base_/backbones/plainvit-ti_deit.py).
_base_ = ['./_base_/mask-rcnn_vit-ti_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/plainvit-ti_deit.py']
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
        'model.neck.SimplePyramid.in_channels': (192, 'the pyramid at the ViT-Ti width'),
        'model.neck.FPN.in_channels': ([48, 96, 192, 192], "the FPN at the pyramid's ViT-Ti widths"),
        'start.checkpoint': ('deit_tiny_patch16_224-a1311bcf.pth', "DeiT's release at ViT-Ti: PlainViT's paper start"),
        'params': 'ViT-Ti: 192 wide, 3 heads',
        'gflops': 'ViT-Ti width',
        'gflops_paper': 'ViT-Ti width',
        'train_gflops': 'ViT-Ti width',
        'lr_scale': "the embeddings' share of the parameters at ViT-Ti (the same rate)",
    },
    measured=dict(gflops=103.5, gflops_paper=103.5, lr_scale=0.186, params=5.57, train_gflops=396.9),
)
