# PlainViT-B, ViTDet's COCO recipe (LSJ 1024, 100 epochs) at ViT-B width: the first _base_.
# The backbone, from DeiT-B, is the second (configs/_base_/backbones/plainvit-b_deit.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/mask-rcnn_vit-b_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/plainvit-b_deit.py']
model = dict(backbone=_base_.backbone)
# Its differences from PlainViT-S's recipe, for the references family (docs/comparison.md; in the B family it is the
# reference itself).
recipe = dict(
    _base_.backbone_recipe,
    differs={
        'model.backbone.arch': (
            'base',
            "the iso-FLOP reference of SR-ViT-S (ViT-B's compute beside its 4 recursions: its paper compares S/T=4 with DeiT-B)",
        ),
        'model.neck.SimplePyramid.in_channels': (768, 'the pyramid at the ViT-B width'),
        'model.neck.FPN.in_channels': ([192, 384, 768, 768], "the FPN at the pyramid's ViT-B widths"),
        'start.checkpoint': ('deit_base_patch16_224-b5f2ef4d.pth', "DeiT's release at ViT-B: PlainViT's paper start"),
        'params': 'ViT-B: 768 wide, 12 heads',
        'gflops': 'ViT-B width',
        'gflops_paper': 'ViT-B width',
        'train_gflops': 'ViT-B width',
        'lr_scale': "the embeddings' share of the parameters at ViT-B (the same rate)",
    },
    measured=dict(gflops=935.8, gflops_paper=935.8, lr_scale=0.19, params=85.84, train_gflops=3501.5),
)
