# reViT-S (docs/methods/revit.md): one shared DeiT-S block applied over the 12 layers of arch='small' with
# num_experts=4 depth-programmed expert FFNs; outputs at the stage ends, layers (2, 5, 8, 11) (the default
# out_indices: the same relative depths at any depth). From DeiT (shared_init='average', router_init='programmed'):
# shared attention/norms <- the mean of DeiT's blocks, expert e <- the mean FFN of the e-th of 4 groups of blocks,
# step t's gate picks its depth group's expert; from scratch the router starts uniform (its zero output layer).
_base_ = './plainvit-s.py'
backbone = dict(type='ReViT', num_experts=4, shared_init='average', router_init='programmed')
backbone_recipe = dict(
    paper_start='configs/cls/revit-small_4xb256_in1k.py',  # its own supervised ImageNet-1k classifier, as its paper
    # its differences from PlainViT's recipe, with their values (tools/analysis_tools/compare.py; MEASURED facts: the why
    # here, the value of each task's recipe in configs/measured.yml)
    differs={
        'model.backbone.type': ('ReViT', 'the method: one block, depth-programmed expert FFNs'),
        'model.backbone.num_experts': (4, "E = 4 expert FFNs (its paper's S/16: 78.2 %)"),
        'model.backbone.shared_init': ('average', 'how it would start from DeiT (unused from its own checkpoint)'),
        'model.backbone.router_init': ('programmed', 'how it would start from DeiT (unused from its own checkpoint)'),
        'params': 'one shared attention and 4 expert FFNs for the 12 layers (docs/methods/revit.md)',
        'gflops': "each step's FFN merged from the experts: the merge's work (docs/methods/revit.md)",
        'train_gflops': "each step's FFN merged from the experts, the merge's backward (and, with with_cp, its recomputation)",
    },
    intended={
        'model.backbone.num_experts': "reViT's experts per block",
        'model.backbone.shared_init': 'which DeiT blocks start the shared ones (docs/methods/revit.md)',
        'model.backbone.router_init': 'how the gates start from a DeiT checkpoint (docs/methods/revit.md)',
    },
)
