# SR-ViT (SoftMoR, SPEC §1): DeiT-S blocks in units [4, 4, 2, 2], each run T=4 steps and mixed
# per token; the 4 unit outputs are the multi-level features.
_base_ = './_base_/mask-rcnn_vit_fpn_1x_coco.py'
model = dict(backbone=dict(type='SRViT', arch='small', unit_sizes=(4, 4, 2, 2), num_recursions=4, readout='soft'))
