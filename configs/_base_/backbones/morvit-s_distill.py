# A DeiT-imitation CONTROL start for the COCO / ADE20K recipes (docs/pretraining.md): MoR-ViT-S feature-distilled
# from DeiT-S at the layers its pyramid reads (configs/distill/morvit-s_feature-distill-deit-s_4xb256-100e_in1k.py), from its DeiT start: it can
# bring the method towards PlainViT's start and no further. Not its paper's start (morvit-s_in1k.py): name this file
# instead as a recipe's second _base_ for the control.
_base_ = ['./morvit-s_deit.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').distill_control(
    'morvit', 's', 'configs/cls/morvit-small_4xb256_in1k.py'
)
