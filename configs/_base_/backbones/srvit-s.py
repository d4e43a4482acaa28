# SR-ViT-S (SoftMoR, docs/methods/srvit.md): the 12 DeiT-S blocks in recursion units [4, 4, 2, 2], each unit
# run num_recursions T=4 times, its recursions mixed per token (readout='soft'): 48 block applications over 12
# layers. The 4 units' last layers (out_indices (3, 7, 9, 11), the default) are the multi-level features.
# From DeiT (timm_init='function'): block i <- DeiT block i, the routers start on recursion 1 (weight 0.99), so
# the model starts as DeiT's function.
# Compute/accuracy knob at test time without retraining:  --cfg-options model.backbone.eval_recursions=2
_base_ = './plainvit-s.py'
backbone = dict(type='SRViT', unit_sizes=(4, 4, 2, 2), num_recursions=4, readout='soft', timm_init='function')
backbone_recipe = dict(
    differs={  # from PlainViT's, where a comparison table shows it (tools/analysis_tools/compare.py)
        'params': 'the step transforms and routers of its recursions (+1.77 M at S: docs/methods/srvit.md)',
        'gflops': 'each unit runs its 4 recursions: 48 block applications for 12 layers (docs/methods/srvit.md)',
        'gflops_paper': 'each unit runs its 4 recursions: 4x the layer applications',
        'global_steps': "its units' recursions: the global steps of its plan at the test grid (docs/methods/srvit.md)",
    },
    intended={
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
        'model.backbone.num_recursions': "SR-ViT's recursions of every unit (docs/methods/srvit.md)",
        'model.backbone.readout': "SR-ViT's readout: the soft mixture of the recursions",
        'model.backbone.timm_init': 'how SR-ViT starts from a DeiT checkpoint: as its function (docs/methods/srvit.md)',
    },
)
