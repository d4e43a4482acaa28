# ImageNet-1k fine-tuning of an mmrecvit backbone that starts from DeiT-S (the other way to a pretrained
# recursive backbone, docs/methods/README.md): the from-scratch recipe (./recvit-small_4xb256_in1k.py) for 100 epochs
# at half its learning rate (decision: shorter and gentler, since the backbone starts with DeiT's features).
# The backbone loads DeiT through its own timm filter (strict; DeiT's classifier is dropped and logged, the
# head starts at zero). Each method's default DeiT start is the function-preserving one where the method
# can represent DeiT: the per-method configs (../<method>-small_deit-pre_4xb256-100e_in1k.py) say which.
# It needs DeiT-S's released weights (https://dl.fbaipublicfiles.com/deit/deit_small_patch16_224-cd65a155.pth,
# the file the COCO/ADE20K recipes start from too) in checkpoints/.
_base_ = './recvit-small_4xb256_in1k.py'

deit_checkpoint = 'checkpoints/deit_small_patch16_224-cd65a155.pth'
# purpose: DeiT is where this pretraining starts on purpose: no warning for a method that cannot represent it
# (mmrecvit/models/start.py warns on a transfer from it).
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=deit_checkpoint, purpose='pretraining')))

max_epochs = 100
train_cfg = dict(max_epochs=max_epochs)
optim_wrapper = dict(optimizer=dict(lr=2.5e-4 * 1024 / 512))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=5, end=max_epochs),
]

# Intended differences from the anchor beyond the from-scratch recipe's (recipe_diff.py merges the entries).
recipe = dict(
    intended={
        'deit_checkpoint': 'a config variable of ours: the DeiT-S start',
        'model.backbone.init_cfg.*': "DeiT-S's released weights through the backbone's strict timm filter",
        'max_epochs': 'a config variable of ours',
        'train_cfg.max_epochs': 'fine-tuning from DeiT: 100 epochs (from scratch: 300)',
        'param_scheduler.CosineAnnealingLR.end': 'the 100 epochs',
        'optim_wrapper.optimizer.lr': 'fine-tuning from DeiT: half the from-scratch rate, 2.5e-4 x batch/512',
        'param_scheduler.CosineAnnealingLR.eta_min': 'fine-tuning: 1e-6, a tenth of the from-scratch floor',
    }
)
