# NaiveRecursiveViT-S, the naive-recursion baseline (docs/methods/baselines.md): num_blocks=3 unique DeiT-S
# blocks applied cyclically over the 12 layers of arch='small'; outputs after layers 3/6/9/12 (the default
# out_indices). From DeiT (timm_init='cycle'): unique block j <- the mean of the DeiT blocks of the layers it runs
# (j, j+3, ...). The one file every recipe of it takes its backbone from (README.md here).
_base_ = './plainvit-s.py'
backbone = dict(type='NaiveRecursiveViT', num_blocks=3, timm_init='cycle')
backbone_recipe = dict(
    differs={  # from PlainViT's, where a comparison table shows it (tools/analysis_tools/compare.py)
        'params': 'its 3 unique blocks serve the 12 layers: a quarter of the block parameters (docs/methods/baselines.md)',
    },
    intended={
        'model.backbone.num_blocks': 'the naive recursive ViT: its unique blocks, cycled over the 12 layers',
        'model.backbone.timm_init': 'which DeiT blocks start the shared ones (docs/methods/baselines.md)',
    },
)
