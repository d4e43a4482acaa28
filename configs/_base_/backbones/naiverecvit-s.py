# NaiveRecursiveViT-S, the naive-recursion baseline (docs/methods/baselines.md): num_blocks=3 unique DeiT-S
# blocks applied cyclically over the 12 layers of arch='small'; outputs after layers 3/6/9/12 (the default
# out_indices). From DeiT (shared_init='cycle'): unique block j <- the mean of the DeiT blocks of the layers it runs
# (j, j+3, ...). The one file every recipe of it takes its backbone from (README.md here).
_base_ = './plainvit-s.py'
backbone = dict(type='NaiveRecursiveViT', num_blocks=3, shared_init='cycle')
backbone_recipe = dict(
    paper_start=None,  # no paper: the naive baseline the recursive papers describe (docs/methods/baselines.md)
    # its differences from PlainViT's recipe, with their values (tools/analysis_tools/compare.py; MEASURED facts: the why
    # here, the value of each task's recipe in configs/measured.yml)
    differs={
        'model.backbone.type': ('NaiveRecursiveViT', 'the method: k unique blocks applied cyclically'),
        'model.backbone.num_blocks': (3, 'its 3 unique blocks serve the 12 layers (docs/methods/baselines.md)'),
        'model.backbone.shared_init': ('cycle', 'how it would start from DeiT (unused from its own checkpoint)'),
        'params': 'its 3 unique blocks serve the 12 layers: a quarter of the block parameters (docs/methods/baselines.md)',
    },
    intended={
        'model.backbone.num_blocks': 'the naive recursive ViT: its unique blocks, cycled over the 12 layers',
        'model.backbone.shared_init': 'which DeiT blocks start the shared ones (docs/methods/baselines.md)',
    },
)
