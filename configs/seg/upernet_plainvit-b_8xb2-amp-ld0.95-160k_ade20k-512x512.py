# PlainViT-B, ViT-Adapter's ADE20K UperNet recipe at ViT-B width: the first _base_.
# The backbone, from DeiT-B, is the second (configs/_base_/backbones/plainvit-b_deit.py: the method,
# its start and its knobs), as in every recipe of it.
_base_ = ['./_base_/upernet_vit-b_8xb2-amp-ld0.95-160k_ade20k-512x512.py', '../_base_/backbones/plainvit-b_deit.py']
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
        'model.backbone.drop_path_rate': (0.3, "ViT-Adapter's 0.3 for ViT-B"),
        'model.neck.in_channels': (768, 'the pyramid at the ViT-B width'),
        'model.decode_head.in_channels': ([192, 384, 768, 768], "UperNet at the pyramid's ViT-B widths"),
        'model.auxiliary_head.in_channels': (768, 'the auxiliary head at the ViT-B width'),
        'start.checkpoint': ('deit_base_patch16_224-b5f2ef4d.pth', "DeiT's release at ViT-B: PlainViT's paper start"),
        'params': 'ViT-B: 768 wide, 12 heads',
        'gflops': 'ViT-B width',
        'gflops_paper': 'ViT-B width',
        'train_gflops': 'ViT-B width',
        'lr_scale': "the embeddings' share of the parameters at ViT-B (the same rate)",
    },
    measured=dict(gflops=214.1, gflops_paper=214.1, lr_scale=0.726, params=85.8, train_gflops=641.0),
)
