# reViT-B as the COCO / ADE20K recipes use it: revit-s_in1k.py at ViT-B width, from its own ViT-B ImageNet-1k
# checkpoint (configs/cls/revit-base_4xb256_in1k.py).
_base_ = ['./revit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'revit-base_4xb256_in1k', "from scratch, DeiT's recipe at ViT-B width", paper=True, arch='base'
)
