"""A method's backbone file (configs/_base_/backbones/) in a detectron2 LazyConfig: one file says each method's
backbone for every framework (issue 39.8).

    from mmrecvit.d2 import use_backbone
    use_backbone(model, __file__, '../_base_/backbones/revit-s_deit.py', recipe)

The file is an mmengine config (`backbone = dict(type=..., ...)`, `backbone_recipe = dict(intended=...,
differs=...)`, with `_base_` inheritance), so it is read with mmengine's `Config` (`LazyConfig.load` knows no
`_base_`). Its `backbone` goes into the model's LazyCall `backbone.net`: `type` names the class (`D2_BACKBONES`),
`init_cfg`'s checkpoint becomes `pretrained` (how the detectron2 recipes spell the start), the rest are constructor
arguments. Its `temperature_schedule` (Edge-RecViT's: the mm recipes' `TemperatureScheduleHook`) becomes
`RecViTRCNN`'s, over the run's `train.max_iter`. Its `backbone_recipe` goes into the recipe's: its `intended`
entries under detectron2's keys (`model.backbone.<arg>` -> `model.backbone.net.<arg>`; the entries for mmengine's
config variables are dropped: a LazyConfig keeps no such variable), its `differs` (tools/analysis_tools/compare.py)
as they are.
"""

from __future__ import annotations

import os.path as osp
from typing import Any

from mmengine.config import Config

from .backbone import D2_BACKBONES

MM_KEY, D2_KEY = 'model.backbone.', 'model.backbone.net.'
RENAMED = {'model.backbone.init_cfg.checkpoint': 'model.backbone.net.pretrained'}


def use_backbone(model: Any, config_file: str, path: str, recipe: Any = None) -> None:
    """Set the LazyCall `model`'s `backbone.net` (in place) to the backbone of the file at `path` (relative to
    `config_file`, the calling LazyConfig's `__file__`), and add the file's intended differences to `recipe.intended`
    if given."""
    file = osp.normpath(osp.join(osp.dirname(config_file), path))
    if not osp.isfile(file):
        raise FileNotFoundError(f'use_backbone: no backbone file {file} ({path!r} from {config_file})')
    cfg = Config.fromfile(file)
    args = cfg.backbone.to_dict()
    name = args.pop('type')
    if name not in D2_BACKBONES:
        raise ValueError(f'{file}: backbone type {name!r} is not an mmrecvit backbone; allowed: {sorted(D2_BACKBONES)}')
    init_cfg = args.pop('init_cfg', None)
    if init_cfg is not None and set(init_cfg) - {'type', 'checkpoint'}:
        args['init_cfg'], args['pretrained'] = init_cfg, None  # a prefix or map location: the whole init_cfg
    else:
        args['pretrained'] = None if init_cfg is None else init_cfg['checkpoint']
    net = model.backbone.net
    net._target_ = D2_BACKBONES[name]
    net.update(args)
    if 'temperature_schedule' in cfg:
        schedule = cfg.temperature_schedule.to_dict()
        schedule.pop('type')
        model.temperature_schedule = dict(schedule, max_iter='${train.max_iter}')
        if recipe is not None:
            recipe.intended['model.temperature_schedule.*'] = (
                f"{name}'s temperature annealed: {cfg.temperature_schedule}"
            )
    if recipe is not None:
        data = cfg.get('backbone_recipe', {})
        recipe.intended.update(
            {
                RENAMED.get(key, D2_KEY + key[len(MM_KEY) :]): why
                for key, why in data.get('intended', {}).items()
                if key.startswith(MM_KEY)
            }
        )
        if data.get('differs'):
            recipe.differs = {**recipe.get('differs', {}), **data['differs']}
