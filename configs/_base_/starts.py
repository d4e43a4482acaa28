# The backbone files' trained starts, each written once (configs/_base_/backbones/README.md): helpers, not a config.
# A backbone file names this file as a second _base_ and takes them out, `_base_.pop('starts')` (a file's own
# `__names` do not reach its children, and what is left in `_base_` is merged into the config), then calls one.
# The result is plain dicts, merged as a file's own `backbone` and `backbone_recipe` would be.


def made_by(recipe, run):
    """The command that makes checkpoints/<run>.pth with `recipe` (a start says it when its file is missing)."""
    return (
        f'python tools/train.py {recipe} --work-dir work_dirs/{run}'
        f' && cp $(cat work_dirs/{run}/last_checkpoint) checkpoints/{run}.pth'
    )


def held_temperature(why):
    """The `differs` entry of an Edge-RecViT start whose ranker's temperature is held at the 0.1 its start ended at
    (its file sets `temperature_schedule = dict(start=0.1, end=0.1)`): `why`."""
    hook = dict(type='TemperatureScheduleHook', start=0.1, end=0.1, schedule='cosine')
    return {'custom_hooks.TemperatureScheduleHook': (hook, why)}


def distill_control(method, size, paper_start, held=None):
    """A DeiT-imitation CONTROL start (docs/pretraining.md): `method` at `size` ('s', 'b') feature-distilled from the
    DeiT of that size at the layers its pyramid reads (configs/distill/), from its DeiT start. `paper_start`: the
    recipe of its paper's start (None: no paper); `held`: why its temperature is held (`held_temperature`)."""
    deit, width = f'DeiT-{size.upper()}', dict(s='small', b='base')[size]
    run = f'{method}-{width}_distill-deit-{size}'
    recipe = f'configs/distill/{method}-{size}_feature-distill-deit-{size}_4xb256-100e_in1k.py'
    teacher = 'DeiT' if size == 's' else deit  # how the S files name their teacher
    differs = {'paper_start': (recipe, 'a DeiT-imitation control (docs/pretraining.md)')} if paper_start else {}
    differs.update(held_temperature(held) if held else {})
    differs.update(
        {
            'start.checkpoint': (f'{run}.pth', f'feature-distilled from {deit}: a DeiT-imitation control'),
            'start.made_by': (recipe, 'the layers its pyramid reads'),
            'pretraining.from': (deit, f"the method's {teacher} start"),
            'pretraining.epochs': (100, "a third of DeiT's schedule (docs/pretraining.md)"),
            'pretraining.mixup': (False, 'no labels'),
            'pretraining.loss': (
                f'feature MSE to deit_{width}_patch16_224.fb_in1k, layers pyramid',
                f"{teacher}'s layers that its pyramid reads",
            ),
        }
    )
    backbone = dict(init_cfg=dict(type='Pretrained', checkpoint=f'checkpoints/{run}.pth', made_by=made_by(recipe, run)))
    if size != 's':
        backbone = dict(arch=width, **backbone)
    intended = {'model.backbone.init_cfg.*': f'its DeiT start feature-distilled from {deit} (docs/pretraining.md)'}
    return backbone, dict(paper_start=paper_start, differs=differs, intended=intended)


__PAPER = 'its own ImageNet-1k classifier, where its paper starts'
__OWN = 'its own ImageNet-1k checkpoint, where its paper starts (docs/pretraining.md)'


def trained(classifier, how, why=__PAPER, first=None, then=None, paper=False, elsewhere=None, held=None, **args):
    """A start trained here, made by the ImageNet-1k recipe configs/cls/<classifier>.py (`how` it trains, `why` this
    start): checkpoints/<run>.pth, `run` the classifier's name without its `_4xb256` batch unless given in `args`, with
    the backbone's other `args` (`intended` also: its `intended` entries). `differs`: `elsewhere` (why its paper starts
    elsewhere: the `paper_start` entry), `held` (`held_temperature`), `first`, the start's own entries, then `then`.
    `paper`: that recipe is its paper's start (`paper_start`)."""
    run = args.pop('run', None) or classifier.replace('_4xb256', '')
    intended = args.pop('intended', None) or {'model.backbone.init_cfg.*': __OWN}
    recipe = f'configs/cls/{classifier}.py'
    init_cfg = dict(type='Pretrained', checkpoint=f'checkpoints/{run}.pth', made_by=made_by(recipe, run))
    differs = {'paper_start': (recipe, elsewhere)} if elsewhere else {}
    differs.update(held_temperature(held) if held else {}, **(first or {}))
    differs.update({'start.checkpoint': (f'{run}.pth', why), 'start.made_by': (recipe, how)}, **(then or {}))
    recipe_data = dict(differs=differs, intended=intended)
    if paper:
        recipe_data = dict(paper_start=recipe, **recipe_data)
    return dict(args, init_cfg=init_cfg), recipe_data


def ablation(classifier, first, run=None, **args):
    """A paper's own ablation (the ablation family, docs/comparison.md): the backbone's `args` changed, started from
    its own ImageNet-1k classifier trained the same way by configs/cls/<classifier>.py (as its paper runs it)."""
    why, how = 'its own ImageNet-1k classifier, trained as the ablation', 'the ablation trained as the method is'
    intended = {f'model.backbone.{key}': 'the ablation (above)' for key in args}
    return trained(classifier, how, why, first, paper=True, run=run, intended=intended, **args)


starts = dict(made_by=made_by, distill_control=distill_control, trained=trained, ablation=ablation)
