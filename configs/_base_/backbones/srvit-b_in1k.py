# SR-ViT-B as the COCO / ADE20K recipes use it: srvit-s_in1k.py at ViT-B width, from its own ViT-B ImageNet-1k
# classifier (configs/cls/srvit-base_4xb256_in1k.py).
_base_ = ['./srvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'srvit-base_4xb256_in1k', 'its paper trains SR-ViT at each T on IN-1k', paper=True, arch='base'
)
