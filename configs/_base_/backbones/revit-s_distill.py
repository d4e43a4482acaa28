# A DeiT-imitation CONTROL start for the COCO / ADE20K recipes (docs/pretraining.md): reViT-S feature-distilled
# from DeiT-S at the layers its pyramid reads (configs/distill/revit-s_feature-distill-deit-s_4xb256-100e_in1k.py), from its DeiT start: it can
# bring the method towards PlainViT's start and no further. Not its paper's start (revit-s_in1k.py): name this file
# instead as a recipe's second _base_ for the control.
_base_ = ['./revit-s_deit.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').distill_control('revit', 's', 'configs/cls/revit-small_4xb256_in1k.py')
