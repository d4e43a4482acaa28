# SR-ViT-S's own ablation (its paper's naive recursion: the final state read out, no mixture), from its own
# ImageNet-1k classifier trained the same way (configs/cls/srvit-small_final-readout_4xb256_in1k.py): the ablation
# family (docs/comparison.md).
_base_ = './srvit-s_in1k.py'
backbone = dict(
    readout='final',
    init_cfg=dict(
        checkpoint='checkpoints/srvit-small_final-readout_in1k.pth',
        made_by='python tools/train.py configs/cls/srvit-small_final-readout_4xb256_in1k.py --work-dir work_dirs/srvit-small_final-readout_in1k'
        ' && cp $(cat work_dirs/srvit-small_final-readout_in1k/last_checkpoint) checkpoints/srvit-small_final-readout_in1k.pth',
    ),
)
backbone_recipe = dict(
    paper_start='configs/cls/srvit-small_final-readout_4xb256_in1k.py',  # as its paper runs the ablation: trained on ImageNet-1k the same way
    differs={
        'model.backbone.readout': ('final', "the paper's ablation: the final recursion read out (no soft mixture)"),
        'start.checkpoint': (
            'srvit-small_final-readout_in1k.pth',
            'its own ImageNet-1k classifier, trained as the ablation',
        ),
        'start.made_by': (
            'configs/cls/srvit-small_final-readout_4xb256_in1k.py',
            'the ablation trained as the method is',
        ),
    },
    intended={
        'model.backbone.readout': 'the ablation (above)',
    },
)
