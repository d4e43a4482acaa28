# SR-ViT-S's own ablation (final readout), in the ablation family (docs/comparison.md).
# ViTDet's COCO recipe (LSJ 1024, 100 epochs): the first _base_; the backbone: configs/_base_/backbones/srvit-s-final_in1k.py.
_base_ = ['./_base_/mask-rcnn_vit_vitdet-fpn_16xb4-amp-lsj-100e_coco.py', '../_base_/backbones/srvit-s-final_in1k.py']
model = dict(backbone=_base_.backbone)
recipe = dict(
    _base_.backbone_recipe,
    measured=dict(
        gflops=1182.9, gflops_paper=1168.4, global_steps='16 of 48', lr_scale=0.25, params=23.48, train_gflops=4480.1
    ),
)
