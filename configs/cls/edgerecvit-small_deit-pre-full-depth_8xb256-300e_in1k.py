# Edge-RecViT's own ablation (the recursive stack at full depth, no token-adaptive depth): its paper's recipe
# (edgerecvit-small_deit-pre_8xb256-300e_in1k.py) with every token run to the full depth (depth_shift=11 lifts every
# ranker depth to 12), the ranker's losses off and a plain ImageClassifier (CCE scales by a ranker's confidence that
# decides nothing here). The ranker is still built (its 0.30 M parameters change no output). The start of its dense
# ablation recipes (configs/_base_/backbones/edgerecvit-s-full_in1k.py).
_base_ = './edgerecvit-small_deit-pre_8xb256-300e_in1k.py'
model = dict(type='ImageClassifier', backbone=dict(depth_shift=11, stb_loss_weight=0.0, du_loss_weight=0.0))
recipe = dict(
    intended={
        'model.type': None,  # the anchor's ImageClassifier again
        'model.backbone.depth_shift': 'the ablation: every token at the full depth',
        'model.backbone.stb_loss_weight': 'the ablation: no ranker loss',
        'model.backbone.du_loss_weight': 'the ablation: no ranker loss',
    }
)
