# PlainViT-S, the baseline: DeiT-S, 12 distinct blocks (depth 12 from arch='small'); outputs after blocks 3/6/9/12
# (the default out_indices). The one file every recipe of it takes its backbone from (README.md here).
backbone = dict(type='PlainViT', arch='small')
backbone_recipe = dict(
    # where its paper starts (tools/analysis_tools/compare.py checks every recipe's start against it)
    paper_start='DeiT release',
    intended={
        'backbone.*': "a config variable of ours: the method's backbone (configs/_base_/backbones/), merged into the model",
        'backbone_recipe.*': "a config variable of ours: the backbone's recipe data, merged into `recipe`",
    },
)
