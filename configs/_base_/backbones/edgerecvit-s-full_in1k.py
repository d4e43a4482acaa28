# Edge-RecViT-S's own ablation (the recursive stack at full depth without token-adaptive depth: depth_shift=11
# lifts every ranker depth to 12; the ranker is built but decides nothing), from its own ImageNet-1k classifier
# trained the same way (its paper's recipe, no ranker losses, no CCE:
# configs/cls/edgerecvit-small_deit-pre-full-depth_8xb256-300e_in1k.py): the ablation family (docs/comparison.md).
_base_ = ['./edgerecvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').ablation(
    'edgerecvit-small_deit-pre-full-depth_8xb256-300e_in1k',
    {
        'model.backbone.stb_loss_weight': (0.0, 'the ablation: no ranker loss'),
        'model.backbone.du_loss_weight': (0.0, 'the ablation: no ranker loss'),
        'eval_knobs': (
            'max_depth None; depth_shift 11',
            'the ablation: every token at the full depth, in training and test',
        ),
        'pretraining.loss': None,  # no CCE: the reference's cross-entropy
    },
    depth_shift=11,
    stb_loss_weight=0.0,
    du_loss_weight=0.0,
    run='edgerecvit-small_full-depth_in1k',
)
