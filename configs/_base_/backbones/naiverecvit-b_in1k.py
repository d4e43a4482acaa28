# NaiveRecursiveViT-B as the COCO / ADE20K recipes use it: naiverecvit-s_in1k.py at ViT-B width, from its own ViT-B
# ImageNet-1k checkpoint (configs/cls/naiverecvit-base_4xb256_in1k.py).
_base_ = ['./naiverecvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'naiverecvit-base_4xb256_in1k',
    "from scratch, DeiT's recipe at ViT-B width",
    'its own ImageNet-1k classifier (no paper: as the recursive papers train theirs)',
    arch='base',
)
