# Edge-RecViT-S (docs/methods/edge_recvit.md): a DeiT-S head block, one shared block up to 10 times, a tail
# block (the 12 layers of arch='small'); the EARR ranker gives each token its depth. Outputs after layers 3/6/9/12
# (the default out_indices). From DeiT (the authors' code): head/shared/tail <- blocks 0/6/11, DeiT's final norm on
# the tail (final_norm, the class default, written out). Compute/accuracy knobs at test time without retraining:
#   --cfg-options model.backbone.max_depth=8  (or depth_shift=-2)
_base_ = './plainvit-s.py'
backbone = dict(type='EdgeRecViT', shared_init_block=6, final_norm=True)
# Trains as it tests: the Gumbel temperature annealed from 1 to 0.1 (cosine) over the run, so the training depths,
# drawn from softmax(z / tau), end on the argmax depths eval runs (decision: the paper gives no schedule;
# docs/methods/edge_recvit.md has the measured share). Every Edge-RecViT recipe adds this hook (detectron2's:
# RecViTRCNN's temperature_schedule, mmrecvit.d2.use_backbone).
temperature_schedule = dict(type='TemperatureScheduleHook', start=1.0, end=0.1, schedule='cosine')
backbone_recipe = dict(
    differs={  # from PlainViT's, where a comparison table shows it (tools/analysis_tools/compare.py)
        'params': 'a head, one shared block and a tail for the 12 layers, and the EARR ranker (docs/methods/edge_recvit.md)',
        'gflops': "the ranker's work, and at test the tokens' depths decide (the full depth without its trained "
        'ranker; docs/methods/edge_recvit.md)',
        'gflops_paper': "linear in the tokens' mean depth, which the ranker decides",
    },
    intended={
        'temperature_schedule.*': "a config variable of ours: Edge-RecViT's temperature schedule (custom_hooks)",
        'custom_*hooks.TemperatureScheduleHook*': "Edge-RecViT's Gumbel temperature annealed: it trains as it tests",
        'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared block",
        'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
    },
)
