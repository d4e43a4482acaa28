# SR-ViT (SoftMoR, SPEC §1): DeiT-S blocks in units [4, 4, 2, 2], each run T=4 steps and mixed
# per token; the 4 unit outputs are the multi-level features.
_base_ = './_base_/upernet_vit_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(type='SRViT', arch='small', unit_sizes=(4, 4, 2, 2), num_recursions=4, readout='soft'))
