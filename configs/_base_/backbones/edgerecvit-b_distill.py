# A DeiT-imitation CONTROL start for the COCO / ADE20K recipes (docs/pretraining.md): Edge-RecViT-B feature-distilled
# from DeiT-B at the layers its pyramid reads (configs/distill/edgerecvit-b_feature-distill-deit-b_4xb256-100e_in1k.py), from its DeiT start: it can
# bring the method towards PlainViT's start and no further. Not its paper's start (edgerecvit-b_in1k.py): name this file
# instead as a recipe's second _base_ for the control.
_base_ = ['./edgerecvit-s_distill.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').distill_control(
    'edgerecvit', 'b', 'configs/cls/edgerecvit-base_deit-pre_8xb256-300e_in1k.py'
)
