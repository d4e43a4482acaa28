"""Config, model and image plumbing shared by the tools (get_flops, visualize_depth, gen_metafile, ...).

add_cfg_options(parser)          the `--cfg-options key=value ...` every config tool takes (as tools/train.py)
add_shape_option(parser, help)   `--shape H [W]`, read back by `shape_arg`
load_config(path, cfg_options)   mmengine Config; `init_scope` selects mmdet's, mmseg's or mmpretrain's registries
build_model(cfg, checkpoint)     the detector/segmentor/classifier through that registry, eval mode, weights loaded
load_model(config, checkpoint)   the three above in one: (cfg, scope, model, what the weights are)
default_image(scope, data_root)  a toy val image under the caller's data root (written by `make_toy_data` if absent)
prepare_inputs(model, cfg, img)  the config's test pipeline (or an exact --shape) + data preprocessor
is_lazy_config(path)             a detectron2 LazyConfig (configs/d2/) rather than an mmengine config
in_percent(metrics)              every score in percent, as this repository writes them (54.0 AP, 30.3 mIoU)
"""

from __future__ import annotations

import ast
import copy
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config, DictAction
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import init_default_scope
from mmengine.runner import load_checkpoint
from torch import nn

from ..datasets import make_toy_data
from ..inputs import InputError, config_file, image_file
from ..models.checkpoint import load_pretrained, read_checkpoint

# Toy val image each framework's default input comes from (kind for `make_toy_data`, path under the data root).
TOY_IMAGES = {
    'mmdet': ('coco', 'toy_coco/val2017/000001000001.jpg'),
    'mmseg': ('ade', 'toy_ade/ADEChallengeData2016/images/validation/ADE_val_00000001.jpg'),
    'mmpretrain': ('cls', 'toy_cls/val/circle/val_000000.jpg'),
}
SCOPES = tuple(TOY_IMAGES)


def add_cfg_options(parser: Any, what: str = 'config settings', example: str = 'tools/train.py') -> None:
    """`--cfg-options key=value ...`: overrides merged into the config (`load_config`)."""
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction, default=None, help=f'override {what}, key=value (as {example})'
    )


def load_config(path: str | Path, cfg_options: dict | None = None) -> Any:
    """An mmengine `Config` from a file, with `--cfg-options`-style overrides merged in; a missing or non-config
    file is one `InputError` (`mmrecvit.inputs`)."""
    cfg = Config.fromfile(config_file(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if 'model' not in cfg:
        raise InputError(f'config {str(path)!r} has no model')
    return cfg


def add_shape_option(parser: Any, help: str) -> None:
    """`--shape H [W]` in pixels (read back with `shape_arg`)."""
    parser.add_argument('--shape', type=int, nargs='+', default=None, metavar='PX', help=help)


def shape_arg(parser: Any, values: Sequence[int] | None) -> tuple[int, int] | None:
    """A tool's `--shape H [W]` -> (H, W) (None when not given); `parser.error` for other lengths."""
    if values is None:
        return None
    if len(values) not in (1, 2):
        parser.error(f'--shape takes H or H W, got {len(values)} numbers')
    return values[0], values[-1]


def init_scope(cfg: Any) -> str:
    """Import mmrecvit (registration) and make the config's framework the default registry scope."""
    scope = cfg.get('default_scope')
    if scope not in SCOPES:
        raise InputError(f'config has default_scope={scope!r}; the analysis tools need one of {list(SCOPES)}')
    importlib.import_module(scope)
    init_default_scope(scope)
    return scope


def load_weights(model: nn.Module, checkpoint: str) -> str:
    """Load `checkpoint` strictly; returns what was loaded, in words.

    A checkpoint of the whole model (keys `backbone.*`, e.g. from `tools/train.py`) goes through
    mmengine's loader (strict); a backbone-only or timm/DeiT checkpoint through the backbone's own
    filter (`mmrecvit.models.checkpoint.load_pretrained`, strict, key maps and pos_embed resampling).
    """
    keys = read_checkpoint(checkpoint)
    if any(k.startswith('backbone.') for k in keys):
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True, logger='silent')
        return f'whole model from {checkpoint}'
    backbone = getattr(model, 'backbone', None)
    if backbone is None:
        raise InputError(f'{checkpoint!r} has no backbone.* keys and the model has no backbone to load it into')
    load_pretrained(backbone, checkpoint)
    return f'backbone only from {checkpoint} (neck and heads randomly initialised)'


def build_model(cfg: Any, checkpoint: str | None = None, seed: int | None = 0) -> tuple[nn.Module, str]:
    """The config's detector/segmentor/classifier through its framework's registry, in eval mode.

    `checkpoint`: a file (see `load_weights`), or None for the weights the modules initialise
    themselves with (random; the config's `init_cfg`, e.g. a DeiT file, is *not* loaded).
    `seed`: torch's seed before building, so random weights (and the routing of a random ranker)
    are the same in every tool (None: leave the generator alone).
    Returns the model and a description of its weights.
    """
    if seed is not None:
        torch.manual_seed(seed)
    scope = init_scope(cfg)
    registry = importlib.import_module(f'{scope}.registry')
    model_cfg = copy.deepcopy(cfg.model)
    if scope == 'mmseg':
        model_cfg.pop('pretrained', None)  # the backbone's init_cfg says what to load
    if cfg.get('data_preprocessor') is not None:  # a top-level one (mmpretrain's configs), as the Runner passes it
        model_cfg.setdefault('data_preprocessor', copy.deepcopy(cfg.data_preprocessor))
    model = registry.MODELS.build(model_cfg)
    if checkpoint is None:
        weights = f'random initialisation (seed {seed}, no checkpoint)'
    else:
        weights = load_weights(model, checkpoint)
    return model.eval(), weights


def load_model(
    config: str | Path, checkpoint: str | None, cfg_options: dict | None = None, seed: int | None = 0
) -> tuple[Any, str, nn.Module, str]:
    """What a config tool loads: the config with its overrides, its framework's scope (`init_scope`), the model
    with the checkpoint's weights or the seeded initialisation (`build_model`): (cfg, scope, model, weights)."""
    cfg = load_config(config, cfg_options)
    scope = init_scope(cfg)
    model, weights = build_model(cfg, checkpoint, seed=seed)
    return cfg, scope, model, weights


def default_image(scope: str, data_root: str | Path) -> Path:
    """The framework's toy val image under `data_root`; writes the toy set there with `make_toy_data`
    (default arguments, as `tools/misc/make_toy_data.py`) when it is missing.

    `data_root` comes from the caller (the tools pass their repository's data/): the package does not
    assume it lives in a repository checkout (an installed wheel has no data/ beside it)."""
    if scope not in TOY_IMAGES:
        raise ValueError(f'no toy image for scope {scope!r}; allowed: {list(TOY_IMAGES)}')
    kind, rel = TOY_IMAGES[scope]
    root = Path(data_root)
    path = root / rel
    if not path.is_file():
        make_toy_data(root, which=[kind], progress=False)
        if not path.is_file():
            raise FileNotFoundError(f'make_toy_data did not write {path}')
    return path


def inference_pipeline(cfg: Any, shape: Sequence[int] | None = None) -> list[dict]:
    """The config's test pipeline for an unannotated image file.

    Annotation loading is dropped. With `shape` (H, W) every resize and crop is replaced by one
    exact resize to H x W (no aspect ratio kept), so the model input is H x W before its
    preprocessor pads.
    """
    if cfg.get('test_dataloader') is not None and 'pipeline' in cfg.test_dataloader.get('dataset', {}):
        pipeline = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
    elif cfg.get('test_pipeline') is not None:
        pipeline = copy.deepcopy(cfg.test_pipeline)
    else:
        raise InputError('the config has neither test_dataloader.dataset.pipeline nor test_pipeline')
    pipeline = [dict(t) for t in pipeline if 'LoadAnnotations' not in str(t.get('type', ''))]
    if shape is not None:
        H, W = (int(v) for v in shape)
        pipeline = [t for t in pipeline if not any(k in str(t.get('type', '')) for k in ('Resize', 'Crop'))]
        load = next((i for i, t in enumerate(pipeline) if 'LoadImage' in str(t.get('type', ''))), -1)
        pipeline.insert(load + 1, dict(type='Resize', scale=(W, H), keep_ratio=False))
    return pipeline


def prepare_inputs(model: nn.Module, cfg: Any, image: str | Path, shape: Sequence[int] | None = None) -> dict:
    """One image through the test pipeline and the model's data preprocessor (batch of 1).

    Returns the preprocessor's dict (`inputs` (1, 3, H, W) normalised and padded, `data_samples`)
    plus `image` (the pipeline's output image, RGB uint8 (H, W, 3), for drawing).
    """
    image_file(image)  # a missing or non-image file: one InputError naming it
    results = Compose(inference_pipeline(cfg, shape))(dict(img_path=str(image), img_id=0))
    batch = pseudo_collate([results])
    with torch.no_grad():
        data = model.data_preprocessor(batch, False)
    img = results['inputs']  # (3, H, W) uint8, BGR as `LoadImageFromFile` reads it
    data['image'] = img.flip(0).permute(1, 2, 0).numpy()
    return data


def backbone_of(model: nn.Module) -> nn.Module | None:
    return getattr(model, 'backbone', None)


def forward_backbone(model: nn.Module, data: dict) -> tuple[nn.Module, Any]:
    """Run only the backbone on the prepared inputs (no grad), for its statistics: (the backbone, the forward's
    `ForwardStats` or None for a backbone that reports none)."""
    backbone = backbone_of(model)
    if backbone is None:
        raise ValueError(f'{type(model).__name__} has no backbone')
    with torch.no_grad():
        out = backbone(data['inputs'])
    return backbone, getattr(out, 'stats', None)


def in_percent(metrics: dict[str, float]) -> dict[str, float]:
    """The frameworks' metrics with every score in percent: mmdet's `CocoMetric` reports AP as a fraction (0.540,
    and -1 where a size has no object), mmseg's `IoUMetric` and mmpretrain's `Accuracy` in percent already."""
    coco = lambda k, v: k.startswith('coco/') and '_mAP' in k and v >= 0  # noqa: E731
    return {k: 100 * v if coco(k, v) else v for k, v in metrics.items()}


def is_lazy_config(file: str | Path) -> bool:
    """A detectron2 LazyConfig: a file that imports detectron2 or mmrecvit.d2, or imports relatively (`from
    .common.x import model`: how LazyConfigs derive; an mmengine config derives by `_base_`)."""
    tree = ast.parse(Path(file).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += ['.' * n.level + (n.module or '') for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    return any(m.startswith(('.', 'detectron2', 'mmrecvit.d2')) for m in names)
