# SR-ViT-S's own ablation (its paper's naive recursion: the final state read out, no mixture), from its own
# ImageNet-1k classifier trained the same way (configs/cls/srvit-small_final-readout_4xb256_in1k.py): the ablation
# family (docs/comparison.md).
_base_ = ['./srvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').ablation(
    'srvit-small_final-readout_4xb256_in1k',
    {'model.backbone.readout': ('final', "the paper's ablation: the final recursion read out (no soft mixture)")},
    readout='final',
)
