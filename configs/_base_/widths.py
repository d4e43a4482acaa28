# The recipes at another ViT width than S (ViT-B, the iso-FLOP reference; ViT-Ti, the iso-parameter one), each width
# written once: helpers, not a config. A file names this file as one more _base_ and takes them out,
# `_base_.pop('widths')` (what is left in `_base_` is merged into the config), then calls one.

# each fact of a width, by size ('b': ViT-B, 'ti': ViT-Ti); `adapter`: ViT-Adapter's name of it; `anchor`: the anchor
# recipes' own width (ViTDet-B's, ViT-Adapter-B's)
__FACTS = dict(
    arch=dict(b='base', ti='tiny'),
    name=dict(b='ViT-B', ti='ViT-Ti'),
    adapter=dict(b='ViT-B', ti='ViT-T'),
    deit=dict(b='DeiT-B', ti='DeiT-Ti'),
    dim=dict(b=768, ti=192),
    heads=dict(b=12, ti=3),
    drop_path=dict(b=0.3, ti=0.1),
    anchor=dict(b=True, ti=False),
    checkpoint=dict(b='deit_base_patch16_224-b5f2ef4d.pth', ti='deit_tiny_patch16_224-a1311bcf.pth'),
    role=dict(
        b="the iso-FLOP reference of SR-ViT-S (ViT-B's compute beside its 4 recursions: its paper compares S/T=4 with "
        'DeiT-B)',
        ti="the iso-parameter reference of the shared-weight methods (DeiT-Ti's parameters beside their 5.7-6.0 M)",
    ),
)
__SIZES = {size: {fact: values[size] for fact, values in __FACTS.items()} for size in ('b', 'ti')}


def pyramid(dim):
    """The four pyramid levels' widths (strides 4, 8, 16, 32) from the ViT's width."""
    return [dim // 4, dim // 2, dim, dim]


def cls(size):
    """The ImageNet-1k recipe at `size`: (embed_dim, model, recipe), the head's width restated from the width."""
    s = __SIZES[size]
    model = dict(backbone=dict(arch=s['arch']), head=dict(in_channels=s['dim']))
    intended = {
        'model.backbone.arch': f'{s["arch"]} = {s["name"]} ({s["dim"]} wide, {s["heads"]} heads, 12 layers)',
        'model.head.in_channels': f'the {s["name"]} width',
    }
    return s['dim'], model, dict(intended=intended)


def det(base_model, size):
    """ViTDet's COCO recipe at `size`, from its DeiT: (embed_dim, model, recipe). The neck's widths are restated from
    the width (mmengine computed `base_model`'s from the base's embed_dim, 384)."""
    s = __SIZES[size]
    neck = [dict(base_model.neck[0], in_channels=s['dim']), dict(base_model.neck[1], in_channels=pyramid(s['dim']))]
    backbone = dict(arch=s['arch'], init_cfg=dict(checkpoint=f'checkpoints/{s["checkpoint"]}'))
    width = f'{s["name"]} ({s["dim"]} wide, {s["heads"]} heads, 12 layers)' + (
        ": the anchor's width" if s['anchor'] else ''
    )
    intended = {
        'model.backbone.arch': f'{width}, named by our arch',
        'model.backbone.init_cfg.checkpoint': f'{s["deit"]} (ImageNet-1k supervised) weights rather than MAE',
    }
    return s['dim'], dict(backbone=backbone, neck=neck), dict(intended=intended)


def seg(size):
    """ViT-Adapter's ADE20K UperNet recipe at `size`, from its DeiT, with ViT-Adapter's drop path for it: (embed_dim,
    model, recipe). The neck's and heads' widths are restated from the width."""
    s = __SIZES[size]
    dim, name = s['dim'], s['name']
    backbone = dict(
        arch=s['arch'], drop_path_rate=s['drop_path'], init_cfg=dict(checkpoint=f'checkpoints/{s["checkpoint"]}')
    )
    model = dict(
        backbone=backbone,
        neck=dict(in_channels=dim),
        decode_head=dict(in_channels=pyramid(dim)),
        auxiliary_head=dict(in_channels=dim),
    )
    intended = {
        'model.backbone.arch': f'{s["arch"]} = {s["deit"]}: {dim} wide, {s["heads"]} heads, 12 layers',
        # ViT-Ti: ViT-Adapter's 0.1 for ViT-T is the anchor's own
        'model.backbone.drop_path_rate': f"ViT-Adapter's {s['drop_path']} for {name}" if s['anchor'] else None,
        'model.auxiliary_head.in_channels': f'{name} width',
        'model.decode_head.in_channels': f"the pyramid's widths at {name}",
        'model.neck.in_channels': f'{name} width',
        'embed_dim': f'{name} width',
    }
    return dim, model, dict(intended=intended)


def reference(bases, size, task):
    """The recipe of PlainViT at `size` for `task` ('det', 'seg'), its backbone file's `backbone_recipe` (in the
    recipe's `bases`) with its differences from PlainViT-S's recipe, for the references family (docs/comparison.md;
    in its width's family it is the reference itself); their values measured: configs/measured.yml."""
    s = __SIZES[size]
    dim, name = s['dim'], s['name']
    differs = {'model.backbone.arch': (s['arch'], s['role'])}
    if task == 'det':
        differs['model.neck.SimplePyramid.in_channels'] = (dim, f'the pyramid at the {name} width')
        differs['model.neck.FPN.in_channels'] = (pyramid(dim), f"the FPN at the pyramid's {name} widths")
    else:
        differs['model.backbone.drop_path_rate'] = (
            s['drop_path'],
            f"ViT-Adapter's {s['drop_path']} for {s['adapter']}",
        )
        differs['model.neck.in_channels'] = (dim, f'the pyramid at the {name} width')
        differs['model.decode_head.in_channels'] = (pyramid(dim), f"UperNet at the pyramid's {name} widths")
        differs['model.auxiliary_head.in_channels'] = (dim, f'the auxiliary head at the {name} width')
    differs['start.checkpoint'] = (s['checkpoint'], f"DeiT's release at {name}: PlainViT's paper start")
    differs['params'] = f'{name}: {dim} wide, {s["heads"]} heads'
    differs.update({key: f'{name} width' for key in ('gflops', 'gflops_paper', 'train_gflops')})
    differs['lr_scale'] = f"the embeddings' share of the parameters at {name} (the same rate)"
    return dict(bases.backbone_recipe, differs=differs)


def references(bases, size):
    """PlainViT's recipe at `size` for each task, {'det': ..., 'seg': ...} (`reference`): what its backbone file
    gives the recipes of it, which take theirs out, `_base_.pop('references')[task]`."""
    return {task: reference(bases, size, task) for task in ('det', 'seg')}


widths = dict(cls=cls, det=det, seg=seg, references=references)
