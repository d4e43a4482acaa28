# SR-ViT-S (SoftMoR, docs/methods/srvit.md): the 12 DeiT-S blocks in recursion units [4, 4, 2, 2], each unit
# run num_recursions T=4 times, its recursions mixed per token (readout='soft'): 48 block applications over 12
# layers. The 4 units' last layers (out_indices (3, 7, 9, 11), the default) are the multi-level features.
# From DeiT (router_init='function'): block i <- DeiT block i, the routers start on recursion 1 (weight 0.99), so
# the model starts as DeiT's function.
# Compute/accuracy knob at test time without retraining:  --cfg-options model.backbone.eval_recursions=2
_base_ = './plainvit-s.py'
backbone = dict(type='SRViT', unit_sizes=(4, 4, 2, 2), num_recursions=4, readout='soft', router_init='function')
backbone_recipe = dict(
    paper_start='configs/cls/srvit-small_4xb256_in1k.py',  # its own ImageNet-1k classifier at T=4, as its paper
    # its differences from PlainViT's recipe, with their values (tools/analysis_tools/compare.py; MEASURED facts: the why
    # here, the value of each task's recipe in configs/measured.yml)
    differs={
        'model.backbone.type': ('SRViT', 'the method: recursion units whose recursions are mixed per token'),
        'model.backbone.unit_sizes': ((4, 4, 2, 2), "SR-ViT's recursion units, coarse to fine (docs/methods/srvit.md)"),
        'model.backbone.num_recursions': (4, 'T = 4 recursions of every unit (its paper: 82.48 % at T=4)'),
        'model.backbone.readout': ('soft', "SR-ViT's readout: the soft mixture of the recursions"),
        'model.backbone.router_init': ('function', 'how it would start from DeiT (unused from its own checkpoint)'),
        'params': 'the step transforms and routers of its recursions (+1.77 M at S: docs/methods/srvit.md)',
        'gflops': 'each unit runs its 4 recursions: 48 block applications for 12 layers (docs/methods/srvit.md)',
        'gflops_paper': 'each unit runs its 4 recursions: 4x the layer applications',
        'train_gflops': 'training runs every recursion too: 4x the layer applications',
        'global_steps': "its units' recursions: the global steps of its plan at the test grid (docs/methods/srvit.md)",
        'lr_scale': 'its step transforms and routers (1.77 M at S) train at x1 (mmrecvit/models/layer_decay.py)',
        'feature_layers': (
            '3, 7, 9, 11',
            "the units' last layers are its multi-level features (docs/methods/srvit.md)",
        ),
        'eval_knobs': ('eval_recursions 4, 4, 4, 4', 'every recursion at test, as trained'),
    },
    intended={
        'model.backbone.unit_sizes': "SR-ViT's recursion units",
        'model.backbone.num_recursions': "SR-ViT's recursions of every unit (docs/methods/srvit.md)",
        'model.backbone.readout': "SR-ViT's readout: the soft mixture of the recursions",
        'model.backbone.router_init': 'how SR-ViT starts from a DeiT checkpoint: as its function (docs/methods/srvit.md)',
    },
)
