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


def distill_control(method, size, paper_start, first=None):
    """A DeiT-imitation CONTROL start (docs/pretraining.md): `method` at `size` ('s', 'b') feature-distilled from the
    DeiT of that size at the layers its pyramid reads (configs/distill/), from its DeiT start. `paper_start`: the
    recipe of its paper's start (None: no paper); `first`: `differs` entries that come before the start's."""
    deit, width = f'DeiT-{size.upper()}', dict(s='small', b='base')[size]
    run = f'{method}-{width}_distill-deit-{size}'
    recipe = f'configs/distill/{method}-{size}_feature-distill-deit-{size}_4xb256-100e_in1k.py'
    teacher = 'DeiT' if size == 's' else deit  # how the S files name their teacher
    differs = {'paper_start': (recipe, 'a DeiT-imitation control (docs/pretraining.md)')} if paper_start else {}
    differs.update(first or {})
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


def trained(run, recipe, how, why=__PAPER, first=None, then=None, intended=None, paper_start=None, **args):
    """A start trained here: checkpoints/<run>.pth, made by `recipe` (`how` it trains, `why` this start), with the
    backbone's `args`. `first` / `then`: `differs` entries before / after the start's; `paper_start`: set if given."""
    init_cfg = dict(type='Pretrained', checkpoint=f'checkpoints/{run}.pth', made_by=made_by(recipe, run))
    differs = dict(first or {}, **{'start.checkpoint': (f'{run}.pth', why), 'start.made_by': (recipe, how)})
    if intended is None:
        intended = {
            'model.backbone.init_cfg.*': 'its own ImageNet-1k checkpoint, where its paper starts (docs/pretraining.md)'
        }
    recipe_data = dict(differs=dict(differs, **(then or {})), intended=intended)
    if paper_start is not None:
        recipe_data = dict(paper_start=paper_start, **recipe_data)
    return dict(args, init_cfg=init_cfg), recipe_data


def ablation(run, recipe, first, **args):
    """A paper's own ablation (the ablation family, docs/comparison.md): the backbone's `args` changed, started from
    its own ImageNet-1k classifier trained the same way by `recipe` (as its paper runs the ablation)."""
    why, how = 'its own ImageNet-1k classifier, trained as the ablation', 'the ablation trained as the method is'
    intended = {f'model.backbone.{key}': 'the ablation (above)' for key in args}
    return trained(run, recipe, how, why, first, intended=intended, paper_start=recipe, **args)


starts = dict(made_by=made_by, distill_control=distill_control, trained=trained, ablation=ablation)
