"""Our recipe names where mmdet's and mmseg's names work (issue 46):

    DetInferencer(model='mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco', weights='model.pth')
    MMSegInferencer(model='upernet_srvit-ti_1xb4-150it_toy-ade20k-256x256', weights='model.pth')

mmengine's inferencers look a name up in the model index of their own package (`model-index.yml` and the metafiles it
imports, mim's layout; `BaseInferencer._load_model_from_metafile`), so mmdet's names work and ours are not there.
Ours ship the same way: `model-index.yml` (importing `metafile.yml`, tools/misc/gen_metafile.py) beside `configs/`,
in the checkout or, in a wheel, in `mmrecvit/.mim/` (setup.py). `install()`, run by `register_all`, makes the
inferencers look up in ours a name their package's index does not list, among the recipes of their task (mmdet:
configs/det/, mmseg: configs/seg/, mmpretrain: configs/cls/); a name in neither is mmengine's `ValueError` with the
closest of ours. No weights are published, so `weights=` is yours (without it mmengine's inferencer warns that the
model is randomly initialised).
"""

from __future__ import annotations

import difflib
import functools
import os.path as osp
from collections.abc import Callable
from typing import Any

import yaml

from ..configs import configs_root

TASKS = {'mmdet': 'det', 'mmseg': 'seg', 'mmpretrain': 'cls'}  # an inferencer's scope -> our configs' folder


def index_root() -> str:
    """The folder of our `model-index.yml`: beside the installed configs (`mmrecvit.configs`: a checkout's `configs/`,
    a wheel's `mmrecvit/.mim/configs/`), as mmdet's sits beside its configs."""
    return osp.dirname(configs_root())


@functools.cache
def _models(root: str) -> tuple[dict[str, Any], ...]:
    with open(osp.join(root, 'model-index.yml')) as f:
        imports = yaml.safe_load(f)['Import']
    models: list[dict[str, Any]] = []
    for meta in imports:
        with open(osp.join(root, meta)) as f:
            models += yaml.safe_load(f)['Models']
    return tuple(models)


def recipes(scope: str) -> dict[str, str]:
    """Name and alias (lower case) -> config path, of our recipes for an inferencer of `scope` (its task's)."""
    root, task = index_root(), TASKS.get(scope)
    found = {}
    for model in _models(root):
        if task is not None and model['Config'].startswith(f'configs/{task}/'):
            aliases = model.get('Alias') or []
            for name in [model['Name'], *([aliases] if isinstance(aliases, str) else aliases)]:
                found[name.lower()] = osp.join(root, model['Config'])
    return found


def _with_our_recipes(load: Callable[..., Any]) -> Callable[..., Any]:
    """`BaseInferencer._load_model_from_metafile` that also finds our recipe names (module docstring)."""

    @functools.wraps(load)
    def load_model_from_metafile(self: Any, model: str) -> tuple[Any, str | None]:
        try:
            return load(self, model)
        except ValueError as e:
            ours = recipes(self.scope)
            if model.lower() not in ours:
                near = difflib.get_close_matches(model.lower(), list(ours), n=1)
                hint = f"; nor among mmrecvit's {self.scope} recipes" + (f' (closest: {near[0]!r})' if near else '')
                raise ValueError(f'{e}{hint}') from e
        from mmengine.config import Config  # mmengine is there: its inferencer called us

        return Config.fromfile(ours[model.lower()]), None  # no published weights: `weights=` is the user's

    load_model_from_metafile.finds_mmrecvit = True
    return load_model_from_metafile


def install() -> None:
    """Make mmengine's inferencers (`DetInferencer`, `MMSegInferencer`, ...) find our recipe names (idempotent)."""
    from mmengine.infer import BaseInferencer

    if not getattr(BaseInferencer._load_model_from_metafile, 'finds_mmrecvit', False):
        BaseInferencer._load_model_from_metafile = _with_our_recipes(BaseInferencer._load_model_from_metafile)
