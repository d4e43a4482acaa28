# MoR-ViT-S (docs/methods/mor_vit.md): a DeiT-S first block, one shared block cycled num_recursions N_r=10
# times with expert-choice routing (capacities (N_r - r)/N_r, gate scale router_alpha 0.1: MoR's from-scratch
# recipe), a last block: 2 + 10 = 12 layers; outputs after layers 3/6/9/12 (the default out_indices).
# Compute/accuracy knob at test time without retraining (one capacity per recursion, non-increasing):
#   --cfg-options "model.backbone.capacities=[1.0,0.8,0.6,0.5,0.4,0.3,0.2,0.15,0.1,0.05]"
# Token-choice routing: model.backbone.routing=token_choice
_base_ = './plainvit-s.py'
backbone = dict(type='MoRViT', num_recursions=10, routing='expert_choice')
backbone_recipe = dict(
    paper_start='configs/cls/morvit-small_4xb256_in1k.py',  # from scratch (its paper: 200 epochs)
    # its differences from PlainViT's recipe, with their values (tools/analysis_tools/compare.py; MEASURED facts: the why
    # here, the value of each task's recipe in configs/measured.yml)
    differs={
        'model.backbone.type': ('MoRViT', 'the method: one shared block, recursions routed per token'),
        'model.backbone.num_recursions': (10, 'N_r = 10 recursions of the shared block: 2 + 10 = 12 layers'),
        'model.backbone.routing': ('expert_choice', "MoR's expert-choice routing"),
        'eval_knobs': ('capacity_schedule 1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1', 'as trained'),
        'params': 'a first, one shared and a last block for the 12 layers, and the routers (docs/methods/mor_vit.md)',
        'gflops': 'expert-choice capacities (N_r - r)/N_r: the tokens each recursion runs (docs/methods/mor_vit.md)',
        'gflops_paper': 'expert-choice capacities: fewer layer applications per token',
        'train_gflops': 'expert-choice capacities in training too',
    },
    intended={
        'model.backbone.num_recursions': "MoR-ViT's recursions of the shared block (docs/methods/mor_vit.md)",
        'model.backbone.routing': "MoR-ViT's routing",
    },
)
