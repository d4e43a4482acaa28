"""Bad configs (issue 9): every constructor argument of every backbone and of the neck is validated.

A table per class lists, for each argument, wrong types and wrong values with the exception
expected and the words its message must contain: the argument's name and what is allowed (the
interval, the choices or the type). `test_the_table_covers_every_argument` makes the table
complete: a new constructor argument without rows fails it. Inference knobs that are plain
attributes (changed on a built model, e.g. by `--cfg-options` at test time) are validated at the
next forward; their rows are in `KNOBS`.
"""

import inspect
import math

import pytest
import torch
from backbone_cases import BACKBONE_CASES

from mmrecvit.models import BACKBONES, SimplePyramid, ViTBackbone

INT = 'must be an int'
BOOL = 'must be True or False'
NUMBER = 'must be a number'
POSITIVE = 'a finite number in (0.0, inf)'
NON_NEGATIVE = 'a finite number in [0.0, inf)'

# ViTBackbone's arguments, through every backbone: (argument, value, exception, words in the message).
COMMON = [
    ('arch', 'huge', ValueError, ['arch', "['tiny', 'small', 'base', 'large']"]),
    ('arch', 3, TypeError, ['arch', 'must be a str', "['tiny', 'small', 'base', 'large']"]),
    ('embed_dim', 0, ValueError, ['embed_dim', '[1, inf]']),
    ('embed_dim', 32.0, TypeError, ['embed_dim', INT]),
    ('embed_dim', 33, ValueError, ['embed_dim (33) must be divisible by num_heads (2)']),
    ('num_heads', 0, ValueError, ['num_heads', '[1, inf]']),
    ('num_heads', '2', TypeError, ['num_heads', INT]),
    ('mlp_ratio', 0, ValueError, ['mlp_ratio', POSITIVE]),
    ('mlp_ratio', 0.01, ValueError, ['mlp_ratio', 'at least 1 hidden unit']),
    ('mlp_ratio', '4', TypeError, ['mlp_ratio', NUMBER]),
    ('mlp_ratio', math.nan, ValueError, ['mlp_ratio', POSITIVE]),
    ('qkv_bias', 1, TypeError, ['qkv_bias', BOOL]),
    ('init_values', 0.0, ValueError, ['init_values', POSITIVE]),
    ('init_values', '1e-5', TypeError, ['init_values', NUMBER]),
    ('patch_size', 0, ValueError, ['patch_size', '[1, inf]']),
    ('patch_size', 16.0, TypeError, ['patch_size', INT]),
    ('img_size', 8, ValueError, ['img_size', '[16, inf]']),
    ('img_size', (64, 64, 64), ValueError, ['img_size', 'an int or (H, W)']),
    ('img_size', 64.0, TypeError, ['img_size', 'an int or (H, W)']),
    ('img_size', '64', TypeError, ['img_size', 'an int or (H, W)']),
    ('img_size', (64, True), TypeError, ['img_size', INT]),
    ('in_channels', 0, ValueError, ['in_channels', '[1, inf]']),
    ('in_channels', None, TypeError, ['in_channels', INT]),
    ('with_cls_token', 'no', TypeError, ['with_cls_token', BOOL]),
    ('drop_path_rate', 1.0, ValueError, ['drop_path_rate', '[0.0, 1.0)']),
    ('drop_path_rate', -0.1, ValueError, ['drop_path_rate', '[0.0, 1.0)']),
    ('drop_path_rate', None, TypeError, ['drop_path_rate', NUMBER]),
    ('with_cp', 'yes', TypeError, ['with_cp', BOOL]),
    ('pretrained', 3, TypeError, ['pretrained', 'checkpoint path (str) or None']),
    ('init_cfg', 'deit.pth', TypeError, ['init_cfg', "dict(type='Pretrained', checkpoint=PATH) or None"]),
    ('init_cfg', dict(type='Kaiming'), ValueError, ["init_cfg['type']", "['Pretrained']"]),
    ('init_cfg', dict(type='Pretrained'), ValueError, ["init_cfg['checkpoint']", 'checkpoint path']),
    (
        'init_cfg',
        dict(type='Pretrained', checkpoint='a.pth', strict=False),
        ValueError,
        ['init_cfg has unknown keys', "['type', 'checkpoint', 'prefix', 'map_location', 'made_by', 'purpose']"],
    ),
    (
        'init_cfg',
        dict(type='Pretrained', checkpoint='a.pth', purpose='finetune'),
        ValueError,
        ["init_cfg['purpose']", "['transfer', 'pretraining', 'distillation']"],
    ),
    ('out_type', 'raw', ValueError, ['out_type', "['featmap', 'cls_token', 'avg_featmap']"]),
    ('window_size', -1, ValueError, ['window_size', '[0, inf]']),
    ('window_size', 14.0, TypeError, ['window_size', INT]),
    ('use_rel_pos', 'yes', TypeError, ['use_rel_pos', BOOL]),
    ('final_norm', 'yes', TypeError, ['final_norm', BOOL]),
    ('nonfinite', 'ignore', ValueError, ['nonfinite', "['raise', 'warn', 'off']"]),
    ('nonfinite', None, ValueError, ['nonfinite', "['raise', 'warn', 'off']"]),
    ('amp_dtype', 'fp32', ValueError, ['amp_dtype', "[None, 'bf16', 'fp16']"]),
    ('compute', 0.0, ValueError, ['compute', '(0, 1]']),
    ('compute', 1.5, ValueError, ['compute', '(0, 1]']),
    ('compute', math.nan, ValueError, ['compute', '(0, 1]']),
    ('compute', '0.5', TypeError, ['compute', '(0, 1]']),
    ('compute', True, TypeError, ['compute', '(0, 1]']),
]
BOTH_PRETRAINED = (
    dict(pretrained='a.pth', init_cfg=dict(type='Pretrained', checkpoint='b.pth')),
    ValueError,
    ['pretrained', 'init_cfg', 'not both'],
)

OUT_INDICES = [
    ('out_indices', [99], ValueError, ['out_indices entry', 'in [']),
    ('out_indices', [1.5], TypeError, ['out_indices entry', INT]),
    ('out_indices', 3, TypeError, ['out_indices', 'list or tuple']),
    ('out_indices', [], ValueError, ['out_indices', 'at least 1']),
]
DEPTH = [
    ('depth', 0, ValueError, ['depth', '[1, inf]']),
    ('depth', 4.0, TypeError, ['depth', INT]),
]
SPECIFIC = {
    'PlainViT': [*DEPTH, *OUT_INDICES],
    'NaiveRecursiveViT': [
        *DEPTH,
        *OUT_INDICES,
        ('num_blocks', 0, ValueError, ['num_blocks', '[1, 6]']),
        ('num_blocks', 7, ValueError, ['num_blocks', '[1, 6]']),
        ('num_blocks', '2', TypeError, ['num_blocks', INT]),
        ('shared_init', 'mean', ValueError, ['shared_init', "['cycle', 'pick', 'average']"]),
    ],
    'SRViT': [
        ('step_transform', 'mlp', ValueError, ['step_transform', "['linear', 'shift', 'none']"]),
        ('router_init', 'zero', ValueError, ['router_init', "['function', 'fresh']"]),
        *DEPTH,
        *OUT_INDICES,
        ('num_blocks', 0, ValueError, ['num_blocks', '[1, inf]']),  # deprecated spellings are checked as given
        ('num_blocks', 4.0, TypeError, ['num_blocks', INT]),
        ('out_units', [4], ValueError, ['out_units entry', '[-4, 3]']),
        ('out_units', [0.5], TypeError, ['out_units entry', INT]),
        ('unit_sizes', [2, 2, 1], ValueError, ['unit_sizes', 'summing to depth (6)']),
        ('unit_sizes', [3, 3, 0], ValueError, ['unit_sizes[2]', '[1, inf]']),
        ('unit_sizes', '222', TypeError, ['unit_sizes', 'list or tuple']),
        ('unit_sizes', [3.0, 3], TypeError, ['unit_sizes[0]', INT]),
        ('num_recursions', 0, ValueError, ['num_recursions[0]', '[1, inf]']),
        ('num_recursions', [2, 2], ValueError, ['num_recursions', 'list of 4 ints (one per unit)']),
        ('num_recursions', 2.0, TypeError, ['num_recursions', 'an int or a list of 4 ints']),
        ('eval_recursions', 4, ValueError, ['eval_recursions[0]', '[1, 2]']),
        ('eval_recursions', [1, 1], ValueError, ['eval_recursions', 'list of 4 ints']),
        ('eval_recursions', 'all', TypeError, ['eval_recursions', 'an int or a list of 4 ints']),
        ('readout', 'mean', ValueError, ['readout', "['soft', 'final', 'hard']"]),
        ('router_input', 'tokens', ValueError, ['router_input', "['unit_input', 'recursion_states']"]),
    ],
    'ReViT': [
        *OUT_INDICES,
        ('depth', 1, ValueError, ['depth', '[2, inf]']),
        ('depth', '4', TypeError, ['depth', INT]),
        ('num_experts', 0, ValueError, ['num_experts', '[1, inf]']),
        ('num_experts', 2.5, TypeError, ['num_experts', INT]),
        ('router_hidden_dim', 0, ValueError, ['router_hidden_dim', '[1, inf]']),
        ('router_hidden_dim', True, TypeError, ['router_hidden_dim', INT]),
        ('router_temperature', 0.0, ValueError, ['router_temperature', POSITIVE]),
        ('router_temperature', 'hot', TypeError, ['router_temperature', NUMBER]),
        ('out_depths', [0.0, 1.0], ValueError, ['out_depths entry', '(0.0, 1.0]']),
        ('out_depths', [1.5], ValueError, ['out_depths entry', '(0.0, 1.0]']),
        ('out_depths', 1.0, TypeError, ['out_depths', 'list or tuple']),
        ('step_drop_rate', 1.0, ValueError, ['step_drop_rate', '[0.0, 1.0)']),
        ('step_drop_rate', '0.3', TypeError, ['step_drop_rate', NUMBER]),
        ('step_drop_groups', 0, ValueError, ['step_drop_groups', '[1, inf]']),
        ('step_drop_groups', 2.5, TypeError, ['step_drop_groups', INT]),
        ('balance_loss_weight', -1.0, ValueError, ['balance_loss_weight', NON_NEGATIVE]),
        ('balance_loss_weight', None, TypeError, ['balance_loss_weight', NUMBER]),
        ('z_loss_weight', -1e-3, ValueError, ['z_loss_weight', NON_NEGATIVE]),
        ('z_loss_weight', math.inf, ValueError, ['z_loss_weight', NON_NEGATIVE]),
        ('diversity_loss_weight', -1e-3, ValueError, ['diversity_loss_weight', NON_NEGATIVE]),
        ('diversity_loss_weight', [1e-3], TypeError, ['diversity_loss_weight', NUMBER]),
        ('shared_init', 'pick', ValueError, ['shared_init', "['average', 'middle']"]),
        ('router_init', 'fitted', ValueError, ['router_init', "['programmed', 'uniform']"]),
    ],
    'EdgeRecViT': [
        ('depth', 2, ValueError, ['depth (head + shared steps + tail, so at least 3)', '[3, inf]']),
        ('depth', 5.0, TypeError, ['depth', INT]),
        *OUT_INDICES,
        ('shared_init_block', -1, ValueError, ['shared_init_block', '[0, inf]']),
        ('frozen_kv', 1, TypeError, ['frozen_kv', BOOL]),
        ('tail_on_all', 'yes', TypeError, ['tail_on_all', BOOL]),
        ('shared_init_block', '6', TypeError, ['shared_init_block', INT]),
        ('stb_loss_weight', -1.0, ValueError, ['stb_loss_weight', NON_NEGATIVE]),
        ('stb_loss_weight', 'x', TypeError, ['stb_loss_weight', NUMBER]),
        ('du_loss_weight', -0.1, ValueError, ['du_loss_weight', NON_NEGATIVE]),
        ('du_loss_weight', None, TypeError, ['du_loss_weight', NUMBER]),
        ('gumbel_tau', 0.0, ValueError, ['gumbel_tau', POSITIVE]),
        ('gumbel_tau', '1', TypeError, ['gumbel_tau', NUMBER]),
        ('max_depth', 0, ValueError, ['max_depth', '[1, 5]']),
        ('max_depth', 6, ValueError, ['max_depth', '[1, 5]']),
        ('max_depth', 2.0, TypeError, ['max_depth', INT]),
        ('depth_shift', 5, ValueError, ['depth_shift', '[-4, 4]']),
        ('depth_shift', 0.5, TypeError, ['depth_shift', INT]),
        ('execution', 'sparse', ValueError, ['execution', "['adaptive', 'masked']"]),
        ('final_norm', 'yes', TypeError, ['final_norm', BOOL]),
    ],
    'MoRViT': [
        ('depth', 1, ValueError, ['depth', '[3, inf]']),
        ('depth', 5.0, TypeError, ['depth', INT]),
        ('num_recursions', 0, ValueError, ['num_recursions (N_r)', '[1, inf]']),
        ('num_recursions', 3.0, TypeError, ['num_recursions', INT]),
        ('unit_size', 0, ValueError, ['unit_size', '[1, inf]']),
        ('unit_size', '1', TypeError, ['unit_size', INT]),
        ('routing', 'random', ValueError, ['routing', "['expert_choice', 'token_choice']"]),
        ('update', 'add', ValueError, ['update', "['interpolate', 'additive']"]),
        ('router_init', 'closed', ValueError, ['router_init', "['open', 'fresh']"]),
        ('capacities', [1.0, 0.5], ValueError, ['capacities', 'num_recursions=3 entries']),
        ('capacities', [1.0, 0.5, 0.0], ValueError, ['capacities entry', '(0.0, 1.0]']),
        ('capacities', [0.5, 1.0, 0.5], ValueError, ['capacities', 'non-increasing']),
        ('capacities', 0.5, TypeError, ['capacities', 'list or tuple']),
        ('capacities', [1, '0.5', 0.2], TypeError, ['capacities entry', NUMBER]),
        ('router_alpha', 0.0, ValueError, ['router_alpha', POSITIVE]),
        ('router_alpha', 'big', TypeError, ['router_alpha', NUMBER]),
        ('bce_loss_weight', -1.0, ValueError, ['bce_loss_weight', NON_NEGATIVE]),
        ('bce_loss_weight', None, TypeError, ['bce_loss_weight', NUMBER]),
        ('out_indices', [5], ValueError, ['out_indices entry', '[-5, 4]']),
        ('out_indices', ['0'], TypeError, ['out_indices entry', INT]),
        ('shared_init', 'middle', ValueError, ['shared_init', "['average', 'pick']"]),
    ],
}
# Arguments of another argument's mode: (backbone, base kwargs, argument, value, exception, words).
# Arguments that act only in some modes (checks.check_modes) are checked in a mode where they act.
COMBINATIONS = [
    *(
        (name, dict(window_size=2), 'global_steps', value, exc, words)
        for name in sorted(BACKBONES)
        for value, exc, words in (
            (3, TypeError, ['global_steps', 'list or tuple']),
            ([0.5], TypeError, ['global_steps entry', INT]),
            ([10_000], ValueError, ['global_steps entry (an application step)']),
        )
    ),
    ('MoRViT', dict(shared_init='pick'), 'shared_init_block', -1, ValueError, ['shared_init_block', '[0, inf]']),
    ('MoRViT', dict(shared_init='pick'), 'shared_init_block', 1.0, TypeError, ['shared_init_block', INT]),
    *(
        ('MoRViT', dict(routing='token_choice'), argument, value, exc, [argument, words])
        for argument, value, exc, words in (
            ('balance_loss_weight', -1.0, ValueError, NON_NEGATIVE),
            ('balance_loss_weight', '0.1', TypeError, NUMBER),
            ('z_loss_weight', -1.0, ValueError, NON_NEGATIVE),
            ('z_loss_weight', math.nan, ValueError, NON_NEGATIVE),
        )
    ),
    *(
        (
            name,
            dict(out_type='cls_token'),
            'with_cls_token',
            False,
            ValueError,
            ["out_type='cls_token' needs with_cls_token=True"],
        )
        for name in sorted(BACKBONES)
    ),
    *(
        (
            name,
            dict(out_type='avg_featmap'),
            'final_norm',
            False,
            ValueError,
            ["out_type='avg_featmap'", 'final_norm must be True'],
        )
        for name in sorted(BACKBONES)
    ),
    (
        'MoRViT',
        dict(routing='token_choice'),
        'capacities',
        [1.0, 0.5, 0.2],
        ValueError,
        ["capacities apply to routing='expert_choice' only", 'capacities=None'],
    ),
    (
        'MoRViT',
        dict(routing='token_choice'),
        'compute',
        0.5,
        ValueError,
        ['compute', "routing='expert_choice'", 'compute=None'],
    ),
    (
        'SRViT',
        dict(depth=5),
        'unit_sizes',
        None,
        ValueError,
        ['unit_sizes has no default for depth=5', 'multiples of 6'],
    ),
    ('SRViT', dict(num_blocks=6), 'depth', 12, ValueError, ['num_blocks=6 (deprecated) and depth=12 disagree']),
    ('MoRViT', dict(num_recursions=3), 'depth', 12, ValueError, ['depth=12 and num_recursions=3 disagree']),
    (
        'MoRViT',
        dict(unit_size=2, num_recursions=None),
        'depth',
        7,
        ValueError,
        ['depth=7 is not 2 + unit_size * num_recursions', 'allowed'],
    ),
]
# Old spellings: an error naming the new argument (nothing silently changes meaning).
RENAMED = [
    ('NaiveRecursiveViT', 'num_unique_blocks', 2, 'num_blocks'),
    ('SRViT', 'num_steps', 2, 'num_recursions'),
    ('SRViT', 'eval_steps', 1, 'eval_recursions'),
]
# Deprecated spellings of the one vocabulary (issue 27): they still work, with a warning naming the new one, and
# build the model the new spelling builds. (backbone, old kwargs, new kwargs)
DEPRECATED = [
    ('SRViT', dict(num_blocks=6), dict(depth=6), 'depth'),
    ('SRViT', dict(out_units=[1, 3]), dict(out_indices=[3, 5]), 'out_indices'),
    ('ReViT', dict(out_depths=[0.5, 1.0]), dict(out_indices=[1, 3]), 'out_indices'),
]
NECK = [
    ('in_channels', 2, ValueError, ['in_channels', '[4, inf]']),
    ('in_channels', 30, ValueError, ['in_channels must be divisible by 4']),
    ('in_channels', 32.0, TypeError, ['in_channels', INT]),
    ('scale_factors', [4, 2, 1, 3], ValueError, ['scale_factors entries', '[4, 2, 1, 0.5, 0.25]']),
    ('scale_factors', [4, 2, True, 0.5], ValueError, ['scale_factors entries', '[4, 2, 1, 0.5, 0.25]']),
    ('scale_factors', [], ValueError, ['scale_factors', 'at least 1']),
    ('scale_factors', 4, TypeError, ['scale_factors', 'list or tuple']),
    ('norm_inputs', 'yes', TypeError, ['norm_inputs', BOOL]),
    ('init_cfg', dict(type='Pretrained', checkpoint='a.pth'), ValueError, ['init_cfg must be None']),
]
# Plain attributes changed on a built model, validated at the next forward (or by a setter).
KNOBS = [
    ('EdgeRecViT', 'max_depth', 9, ValueError, ['max_depth', '[1, 5]']),
    ('EdgeRecViT', 'depth_shift', 1.5, TypeError, ['depth_shift', INT]),
    ('EdgeRecViT', 'execution', 'dense', ValueError, ['execution', "['adaptive', 'masked']"]),
    ('MoRViT', 'capacities', [1.0, 0.9, 0.95], ValueError, ['capacities', 'non-increasing']),
    ('SRViT', 'eval_recursions', 3, ValueError, ['eval_recursions[0]', '[1, 2]']),
    ('ReViT', 'depth', 1, ValueError, ['depth', '[2, inf]']),
    *((name, 'nonfinite', 'skip', ValueError, ['nonfinite', "['raise', 'warn', 'off']"]) for name in sorted(BACKBONES)),
    *((name, 'compute', 0, ValueError, ['compute', '(0, 1]']) for name in sorted(BACKBONES)),
    *((name, 'compute', [0.5], TypeError, ['compute', '(0, 1]']) for name in sorted(BACKBONES)),
]


def rows_of(name):
    """Every (argument, value, exception, words) row for backbone `name`."""
    own = SPECIFIC[name]
    own_args = {row[0] for row in own}
    # A backbone with its own rows for an argument (e.g. ReViT's depth >= 2) replaces the common ones.
    return [row for row in COMMON if row[0] not in own_args] + own


def case_ids(rows, prefix=''):
    return [f'{prefix}{arg}={value!r}' for arg, value, *_ in rows]


def expect_error(build, exc, words):
    with pytest.raises(exc) as info:
        build()
    message = str(info.value)
    for word in words:
        assert word in message, f'{word!r} not in the error: {message}'
    return message


def constructor_arguments(cls):
    """Named parameters of `cls.__init__` and, through `**kwargs`, of `ViTBackbone.__init__`."""
    names = set()
    for c in (cls, ViTBackbone) if issubclass(cls, ViTBackbone) else (cls,):
        params = inspect.signature(c.__init__).parameters.values()
        names |= {p.name for p in params if p.name != 'self' and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    return names


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_the_table_covers_every_argument(name):
    cls = BACKBONES[name]
    covered = {row[0] for row in rows_of(name)} | {c[2] for c in COMBINATIONS if c[0] == name} | {'pretrained'}
    missing = constructor_arguments(cls) - covered
    assert not missing, f'{name}: constructor arguments without bad-value rows: {sorted(missing)}'
    deprecated = {old for backbone, kwargs, _, _ in DEPRECATED if backbone == name for old in kwargs}
    unknown = {row[0] for row in rows_of(name)} - constructor_arguments(cls) - deprecated
    assert not unknown, f'{name}: rows for arguments it does not take: {sorted(unknown)}'


def test_the_neck_table_covers_every_argument():
    assert constructor_arguments(SimplePyramid) == {row[0] for row in NECK}


BACKBONE_ROWS = [(name, *row) for name in sorted(BACKBONES) for row in rows_of(name)]


@pytest.mark.parametrize(
    'name, arg, value, exc, words', BACKBONE_ROWS, ids=[f'{r[0]}-{r[1]}={r[2]!r}' for r in BACKBONE_ROWS]
)
def test_bad_backbone_arguments_name_the_argument_and_what_is_allowed(name, arg, value, exc, words):
    expect_error(lambda: BACKBONES[name](**{**BACKBONE_CASES[name], arg: value}), exc, words)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_pretrained_and_init_cfg_together(name):
    kwargs, exc, words = BOTH_PRETRAINED
    expect_error(lambda: BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs}), exc, words)


@pytest.mark.parametrize(
    'name, base, arg, value, exc, words', COMBINATIONS, ids=[f'{c[0]}-{c[2]}' for c in COMBINATIONS]
)
def test_arguments_that_depend_on_others(name, base, arg, value, exc, words):
    expect_error(lambda: BACKBONES[name](**{**BACKBONE_CASES[name], **base, arg: value}), exc, words)


@pytest.mark.parametrize('name, old, value, new', RENAMED, ids=[f'{r[0]}-{r[1]}' for r in RENAMED])
def test_old_argument_spellings_name_the_new_one(name, old, value, new):
    expect_error(
        lambda: BACKBONES[name](**{**BACKBONE_CASES[name], old: value}), TypeError, [name, repr(old), f'use {new}']
    )


@pytest.mark.parametrize('name, old, new, word', DEPRECATED, ids=[f'{d[0]}-{next(iter(d[1]))}' for d in DEPRECATED])
def test_deprecated_spellings_warn_and_build_the_same_model(name, old, new, word):
    base = {k: v for k, v in BACKBONE_CASES[name].items() if k not in new}
    with pytest.warns(DeprecationWarning, match=f"{name}: '{next(iter(old))}' is deprecated; use {word}"):
        torch.manual_seed(0)
        ours = BACKBONES[name](**base, **old)
    torch.manual_seed(0)
    theirs = BACKBONES[name](**base, **new)
    assert ours.out_indices == theirs.out_indices and ours.depth == theirs.depth
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))


@pytest.mark.parametrize('arg, value, exc, words', NECK, ids=case_ids(NECK))
def test_bad_neck_arguments_name_the_argument_and_what_is_allowed(arg, value, exc, words):
    expect_error(lambda: SimplePyramid(**{'in_channels': 32, arg: value}), exc, words)


@pytest.mark.parametrize('name, attr, value, exc, words', KNOBS, ids=[f'{k[0]}.{k[1]}={k[2]!r}' for k in KNOBS])
def test_knobs_changed_on_a_built_model_are_checked(name, attr, value, exc, words):
    model = BACKBONES[name](**BACKBONE_CASES[name]).eval()

    def set_and_run():
        setattr(model, attr, value)
        with torch.no_grad():
            model(torch.randn(1, 3, 32, 32))

    expect_error(set_and_run, exc, words)


# A misspelt argument name (issue 41): one line naming the class, the name and the closest accepted ones (difflib),
# whether the name reaches the subclass's own __init__ or ViTBackbone's through **kwargs.
MISSPELT = [
    ('PlainViT', 'dept', "PlainViT got an unknown argument 'dept' (closest: 'depth')"),
    ('NaiveRecursiveViT', 'num_block', "NaiveRecursiveViT got an unknown argument 'num_block' (closest: 'num_blocks')"),
    (
        'SRViT',
        'num_recursion',
        "SRViT got an unknown argument 'num_recursion' (closest: 'num_recursions', 'eval_recursions')",
    ),
    ('ReViT', 'with_cpp', "ReViT got an unknown argument 'with_cpp' (closest: 'with_cp')"),
    ('EdgeRecViT', 'dept', "EdgeRecViT got an unknown argument 'dept' (closest: 'depth', 'max_depth')"),
    ('MoRViT', 'num_recursion', "MoRViT got an unknown argument 'num_recursion' (closest: 'num_recursions')"),
]


@pytest.mark.parametrize('name, arg, message', MISSPELT, ids=[m[0] for m in MISSPELT])
def test_a_misspelt_argument_names_the_class_and_the_closest_accepted_ones(name, arg, message):
    with pytest.raises(TypeError) as info:
        BACKBONES[name](**BACKBONE_CASES[name], **{arg: 1})
    assert str(info.value) == message


def test_an_argument_like_none_accepted_lists_them_all_and_several_are_named_together():
    with pytest.raises(TypeError) as info:
        BACKBONES['PlainViT'](**BACKBONE_CASES['PlainViT'], zzz=1, dept=2)
    accepted = sorted(set(inspect.signature(BACKBONES['PlainViT'].__init__).parameters) - {'self', 'kwargs'})
    accepted += [a for a in constructor_arguments(ViTBackbone) if a not in accepted]
    assert str(info.value) == (
        f"PlainViT got unknown arguments 'zzz', 'dept' (closest: 'depth'); it accepts: {', '.join(sorted(accepted))}"
    )


def test_the_neck_names_a_misspelt_argument_too():
    with pytest.raises(TypeError) as info:
        SimplePyramid(in_channel=32)
    assert str(info.value) == "SimplePyramid got an unknown argument 'in_channel' (closest: 'in_channels')"


def test_a_method_without_kwargs_names_its_own_arguments():
    """A subclass whose __init__ takes no **kwargs: Python's own error would fire before its body runs."""

    class Halves(BACKBONES['PlainViT']):
        def __init__(self, arch: str = 'tiny', halves: int = 2) -> None:
            super().__init__(arch=arch, depth=2 * halves, embed_dim=32, num_heads=2, img_size=64)

    with pytest.raises(TypeError) as info:
        Halves(halfs=3)
    assert str(info.value) == "Halves got an unknown argument 'halfs' (closest: 'halves')"
    assert Halves(halves=1).depth == 2


# An argument with no effect in the mode chosen (issue 41, item 7): refused naming the mode, not silently ignored.
NO_EFFECT = [
    (
        'MoRViT',
        dict(shared_init_block=2),  # shared_init='average' (the default) averages the tied layers: no block is picked
        "MoRViT: shared_init_block=2 has no effect with shared_init='average'; leave shared_init_block out or choose "
        'another shared_init',
    ),
    (
        'SRViT',
        dict(readout='final', router_input='recursion_states'),
        "SRViT: router_input='recursion_states' has no effect with readout='final'; leave router_input out or choose "
        'another readout',
    ),
    (
        'SRViT',
        dict(readout='final', router_init='fresh'),
        "SRViT: router_init='fresh' has no effect with readout='final'; leave router_init out or choose another "
        'readout',
    ),
    (
        'MoRViT',
        dict(routing='token_choice', bce_loss_weight=0.1),  # expert choice's routers have the BCE loss
        "MoRViT: bce_loss_weight=0.1 has no effect with routing='token_choice'; leave bce_loss_weight out or choose "
        'another routing',
    ),
    *(
        (
            'MoRViT',
            {name: 0.5},  # routing='expert_choice' (the default): these are token choice's router losses
            f"MoRViT: {name}=0.5 has no effect with routing='expert_choice'; leave {name} out or choose another "
            'routing',
        )
        for name in ('balance_loss_weight', 'z_loss_weight')
    ),
    (
        'ReViT',
        dict(num_experts=1, router_init='uniform'),
        "ReViT: router_init='uniform' has no effect with num_experts=1; leave router_init out or choose another "
        'num_experts',
    ),
    *(
        (
            name,
            dict(global_steps=[1]),  # window_size=0 (the default): every step attends globally already
            f'{name}: global_steps=[1] has no effect with window_size=0; leave global_steps out or choose another '
            'window_size',
        )
        for name in ('PlainViT', 'EdgeRecViT')
    ),
]


@pytest.mark.parametrize('name, kwargs, message', NO_EFFECT, ids=[f'{n}-{next(iter(k))}' for n, k, _ in NO_EFFECT])
def test_an_argument_with_no_effect_in_the_chosen_mode_is_refused_naming_the_mode(name, kwargs, message):
    with pytest.raises(ValueError) as info:
        BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs})
    assert str(info.value) == message


@pytest.mark.parametrize(
    'name, kwargs',
    [
        ('MoRViT', dict(shared_init_block=2, shared_init='pick')),
        ('SRViT', dict(readout='hard', router_init='fresh')),
        ('ReViT', dict(num_experts=2, router_init='uniform')),
        ('PlainViT', dict(global_steps=[1], window_size=2)),
        ('SRViT', dict(readout='final', router_input='unit_input', router_init='function')),  # their defaults
        ('MoRViT', dict(shared_init_block=6)),  # an inherited default says nothing new
        ('MoRViT', dict(routing='token_choice', z_loss_weight=1e-4, balance_loss_weight=0.2)),
        ('MoRViT', dict(bce_loss_weight=1e-2)),
    ],
)
def test_the_same_arguments_where_they_act_or_at_their_default_build(name, kwargs):
    BACKBONES[name](**{**BACKBONE_CASES[name], **kwargs})


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_arch_alone_is_positional_and_the_sizes_override_it_by_name(name):
    """The sizes are resolved in one place (`arguments.resolve_sizes`): `arch` may still come first by position;
    `embed_dim` / `num_heads` / `depth` are names (a size by position would bind to another argument silently)."""
    case = {k: v for k, v in BACKBONE_CASES[name].items() if k != 'arch'}
    model = BACKBONES[name]('tiny', **case)
    assert (model.embed_dim, model.num_heads) == (case['embed_dim'], case['num_heads'])
    with pytest.raises(TypeError, match='positional'):
        BACKBONES[name]('tiny', case['embed_dim'], **{k: v for k, v in case.items() if k != 'embed_dim'})
