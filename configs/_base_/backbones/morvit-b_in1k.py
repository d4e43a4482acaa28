# MoR-ViT-B as the COCO / ADE20K recipes use it: morvit-s_in1k.py at ViT-B width, from its own ViT-B ImageNet-1k
# checkpoint (configs/cls/morvit-base_4xb256_in1k.py).
_base_ = ['./morvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'morvit-base_4xb256_in1k', "from scratch, DeiT's recipe at ViT-B width", paper=True, arch='base'
)
