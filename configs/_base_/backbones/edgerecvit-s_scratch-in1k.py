# Edge-RecViT-S from its own ImageNet-1k checkpoint trained from scratch with DeiT's recipe for 300 epochs
# (configs/cls/edgerecvit-small_4xb256_in1k.py: no label mixing and CCE, as its paper), for the equal-budget family
# (docs/comparison.md), where every method has the same pretraining budget; its paper's start (edgerecvit-s_in1k.py)
# is DeiT-S fine-tuned 300 epochs more: 600 in all.
_base_ = ['./edgerecvit-s_in1k.py', '../starts.py']
backbone, backbone_recipe = _base_.pop('starts').trained(
    'edgerecvit-small_4xb256_in1k',
    "DeiT's recipe without label mixing, CCE",
    then={'pretraining.from': None, 'pretraining.batch': None},  # from scratch and DeiT's 1024, as the reference's
    why='its own ImageNet-1k classifier, from scratch',
    elsewhere="the equal-budget family: 300 epochs from scratch as every method, not its paper's DeiT-S + 300",
    run='edgerecvit-small_scratch-in1k',
)
