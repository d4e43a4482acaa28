# A DeiT-imitation CONTROL start for the COCO / ADE20K recipes (docs/pretraining.md): Edge-RecViT-S feature-distilled
# from DeiT-S at the layers its pyramid reads (configs/distill/edgerecvit-s_feature-distill-deit-s_4xb256-100e_in1k.py), from its DeiT start: it can
# bring the method towards PlainViT's start and no further. Not its paper's start (edgerecvit-s_in1k.py): name this file
# instead as a recipe's second _base_ for the control.
_base_ = ['./edgerecvit-s_deit.py', '../starts.py']
temperature_schedule = dict(start=0.1, end=0.1)  # its distillation annealed the ranker to 0.1: held
backbone, backbone_recipe = _base_.pop('starts').distill_control(
    'edgerecvit',
    's',
    'configs/cls/edgerecvit-small_deit-pre_8xb256-300e_in1k.py',
    held="its depth draw's temperature, held at its start's final 0.1",
)
