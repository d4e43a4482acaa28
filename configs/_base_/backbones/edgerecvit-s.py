# Edge-RecViT-S (docs/methods/edge_recvit.md): a DeiT-S head block, one shared block up to 10 times, a tail
# block (the 12 layers of arch='small'); the EARR ranker gives each token its depth. Outputs after layers 3/6/9/12
# (the default out_indices). From DeiT (the authors' code): head/shared/tail <- blocks 0/6/11, DeiT's final norm on
# the tail (final_norm, the class default, written out). Compute/accuracy knobs at test time without retraining:
#   --cfg-options model.backbone.max_depth=8  (or depth_shift=-2)
_base_ = './plainvit-s.py'
backbone = dict(type='EdgeRecViT', shared_init_block=6, final_norm=True)
# Trains as it tests: the temperature of the depth draw annealed from 1 to 0.1 (cosine) over the run, so the
# training depths, drawn from the tempered categorical softmax(z / tau) (Gumbel-max on z / tau, not the Gumbel-softmax
# relaxation softmax((z + g) / tau)), end on the argmax depths eval runs (decision: the paper gives no schedule;
# docs/methods/edge_recvit.md has the measured share). Every Edge-RecViT recipe adds this hook (detectron2's:
# RecViTRCNN's temperature_schedule, mmrecvit.d2.use_backbone); a recipe whose start already annealed its ranker
# continues from there (edgerecvit-s_in1k.py: held at the start's final 0.1).
temperature_schedule = dict(type='TemperatureScheduleHook', start=1.0, end=0.1, schedule='cosine')
backbone_recipe = dict(
    paper_start='configs/cls/edgerecvit-small_deit-pre_8xb256-300e_in1k.py',  # DeiT-S fine-tuned 300 epochs
    # its differences from PlainViT's recipe, with their values (tools/analysis_tools/compare.py; MEASURED facts: the why
    # here, the value of each task's recipe in configs/measured.yml)
    differs={
        'model.backbone.type': ('EdgeRecViT', 'the method: a head, one shared block, a tail; a depth per token'),
        'model.backbone.shared_init_block': (6, 'the DeiT block of its shared block (unused from its own checkpoint)'),
        'final_norm': (True, "the authors' model: DeiT's final norm on its last output (part of the paper's counts)"),
        'eval_knobs': ('max_depth None; depth_shift 0', 'the depths its ranker decides, as trained'),
        'params': 'a head, one shared block and a tail for the 12 layers, and the EARR ranker (docs/methods/edge_recvit.md)',
        'gflops': "the ranker's work, and at test the tokens' depths decide (the full depth without its trained "
        'ranker; docs/methods/edge_recvit.md)',
        'gflops_paper': "linear in the tokens' mean depth, which its trained ranker decides",
        'train_gflops': "every token at every layer in training (the masked reference), and the ranker's work",
        'lr_scale': 'its ranker (0.30 M at S) and final norm train at x1 (mmrecvit/models/layer_decay.py)',
    },
    intended={
        'temperature_schedule.*': "a config variable of ours: Edge-RecViT's temperature schedule (custom_hooks)",
        'custom_*hooks.TemperatureScheduleHook*': "Edge-RecViT's Gumbel temperature annealed: it trains as it tests",
        'model.backbone.shared_init_block': "Edge-RecViT's DeiT block for the shared block",
        'model.backbone.final_norm': 'Edge-RecViT: the final norm on its last output',
    },
)
