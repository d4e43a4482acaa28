"""Reading checkpoint files into flat state dicts: weights only, one clear error for a bad file (STYLE 6).

    read_checkpoint(path)       file -> flat state dict (unwraps `state_dict`/`model`, strips the wrappers' prefixes
                                with timm's `clean_state_dict`: DDP's `module.`, torch.compile's `_orig_mod.`)
    load_checkpoint_file(path)  `torch.load` weights-only or safetensors, NaN/inf refused (also used by tools/ and,
                                through `mmrecvit.mm.compat`, by mmengine's own loader)
    load_remote(location)       a location with a scheme, downloaded by timm's loaders (`http://`, `https://`,
                                `hf-hub:`) or mmengine's (`open-mmlab://`, `torchvision://`, ...), read weights-only
    load_url(url)               torch.hub's `load_state_dict_from_url` read weights-only (mmengine's `load_url`,
                                through `mmrecvit.mm.compat`: torch.hub's reads with `weights_only=False`)

`checkpoint.py` maps what these read onto a model.
"""

from __future__ import annotations

import os
import pickle
import re
import zipfile

import torch
from timm.models._helpers import clean_state_dict
from timm.models._hub import download_cached_file, load_state_dict_from_hf
from torch import Tensor

CORRUPT = 'the file is truncated, corrupt or not a PyTorch/safetensors checkpoint'
REMOTE = re.compile(r'^([A-Za-z][A-Za-z0-9+.-]*://|hf-hub:)')
# the schemes mmengine 0.10.7's `CheckpointLoader` registers besides http(s) (a name it does not know would end in
# its local-file loader, which is ours: mmrecvit.mm.compat fix 3)
MMENGINE_SCHEMES = ('open-mmlab://', 'openmmlab://', 'torchvision://', 'modelzoo://', 'mmcls://', 'pavi://', 's3://')


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not match the model."""


def read_checkpoint(path: str, map_location: str | torch.device = 'cpu') -> dict[str, Tensor]:
    """Read a `.pth`/`.pt`/`.safetensors` file into a flat state dict of tensors."""
    return unwrap_state_dict(load_checkpoint_file(path, map_location), os.fspath(path))


def load_checkpoint_file(path: str, map_location: str | torch.device = 'cpu', mmap: bool = False) -> object:
    """`torch.load` (weights only) or safetensors, with one clear `CheckpointError` naming the file
    when it is truncated, corrupt or not a checkpoint (torch's own errors range from a bare
    `EOFError` to advice to load with `weights_only=False`), a pickled object outside the
    weights-only allow-list (refused, never run) or NaN/inf weights. The one place every entry
    point reads a checkpoint through (mmengine's own loader too: `mmrecvit.mm.compat` fix 3).

    mmap: map a zip-format file's tensors instead of reading them (a cheap check that the file is
    whole and its pickle readable; legacy non-zip files are read normally).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f'checkpoint must be a file path, got {type(path).__name__} {path!r}')
    path = os.fspath(path)
    if has_scheme(path):
        return load_remote(path, map_location)
    if not os.path.isfile(path):
        raise FileNotFoundError(f'checkpoint file {path!r} does not exist')
    try:
        if path.endswith('.safetensors'):
            from safetensors.torch import load_file

            obj = load_file(path, device=str(map_location))
        else:
            # weights_only: tensors and plain containers only; the few mmengine types found in
            # its checkpoints are allow-listed by mmrecvit.mm.compat.
            obj = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap and zipfile.is_zipfile(path))
    except pickle.UnpicklingError as e:
        found = re.search(r'Unsupported global: GLOBAL \S+', str(e))
        if found is None:  # garbage bytes also end here ("Unsupported operand 116"): a corrupt file
            raise CheckpointError(f'cannot read checkpoint {path!r}: {CORRUPT} ({_first_line(e)})') from e
        raise CheckpointError(
            f'refusing checkpoint {path!r}: it carries a pickled object outside the allowed types '
            f'({found.group(0)}); nothing in it was run (loaded with weights_only=True: tensors and '
            'plain containers only)'
        ) from None
    except Exception as e:  # the unpickler fails on garbage in many ways (EOFError, IndexError, ...)
        raise CheckpointError(f'cannot read checkpoint {path!r}: {CORRUPT} ({_first_line(e)})') from e
    check_finite(obj, path)
    return obj


def has_scheme(location: object) -> bool:
    """Whether `location` is a URL-like checkpoint location (`https://...`, `open-mmlab://...`, `hf-hub:...`)."""
    return isinstance(location, str) and REMOTE.match(location) is not None


def load_remote(location: str, map_location: str | torch.device = 'cpu') -> object:
    """A checkpoint at a location with a scheme, downloaded (and cached) by timm's loaders (`http(s)://`: torch.hub's
    cache; `hf-hub:<repo>[@revision]`: the Hugging Face cache, safetensors first) or mmengine's (`open-mmlab://`,
    `torchvision://` and its other names, whose downloads read through `load_url`), weights only; a location that
    cannot be fetched is one `CheckpointError` naming it."""
    try:
        if location.startswith(('http://', 'https://')):
            return load_url(location, map_location=map_location, check_hash=True)
        if location.startswith('hf-hub:'):
            obj = load_state_dict_from_hf(location[len('hf-hub:') :], weights_only=True)
        elif location.startswith(MMENGINE_SCHEMES):
            from mmengine.runner.checkpoint import CheckpointLoader  # the core imports without mmengine

            obj = CheckpointLoader.load_checkpoint(location, map_location)
        else:
            known = ', '.join(('http://', 'https://', 'hf-hub:', *MMENGINE_SCHEMES))
            raise CheckpointError(f'checkpoint {location!r}: unknown scheme; known: {known}')
    except CheckpointError:
        raise
    except Exception as e:  # network, name and hash errors of three libraries: one line naming the location
        raise CheckpointError(f'cannot fetch checkpoint {location!r}: {_first_line(e)}') from e
    check_finite(obj, location)
    return obj


def load_url(
    url: str,
    model_dir: str | None = None,
    map_location: str | torch.device | None = None,
    progress: bool = False,
    check_hash: bool = False,
    file_name: str | None = None,
    weights_only: bool = True,
) -> object:
    """torch.hub's `load_state_dict_from_url` (its signature, its cache: timm's `download_cached_file`), read by
    `load_checkpoint_file`: weights only whatever `weights_only` says (mmengine's `load_from_http` reads through it,
    `mmrecvit.mm.compat` fix 3)."""
    path = download_cached_file(url if file_name is None else (url, file_name), check_hash, progress, model_dir)
    return load_checkpoint_file(path, 'cpu' if map_location is None else map_location)


def _first_line(e: Exception) -> str:
    return f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'


def check_finite(obj: object, source: str) -> None:
    """A `CheckpointError` listing the weights (the state dict: top level, or under `state_dict` /
    `model`) that hold NaN or inf; a model started from them would train or predict garbage."""
    sd = obj
    if isinstance(obj, dict):
        for key in ('state_dict', 'model'):
            if isinstance(obj.get(key), dict):
                sd = obj[key]
                break
    if not isinstance(sd, dict):
        return
    bad = sorted(
        k for k, v in sd.items() if isinstance(v, Tensor) and v.is_floating_point() and not torch.isfinite(v).all()
    )
    if bad:
        raise CheckpointError(
            f'checkpoint {source!r} has NaN/inf weights in {len(bad)} tensor(s): '
            f'{", ".join(map(str, bad[:10]))}{" ..." if len(bad) > 10 else ""}'
        )


def unwrap_state_dict(obj: object, source: str = 'checkpoint') -> dict[str, Tensor]:
    """`{'state_dict': sd}` (mmengine), `{'model': sd}` (DeiT), raw `sd`; strips a DDP `module.`."""
    if isinstance(obj, dict):
        for key in ('state_dict', 'model', 'module'):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not obj:
        raise CheckpointError(
            f'{source} holds no state dict (expected a dict of tensors, possibly '
            f"under 'state_dict' or 'model'), got {type(obj).__name__}"
        )
    bad = [k for k, v in obj.items() if not isinstance(v, Tensor)]
    if bad:
        raise CheckpointError(f'{source}: state dict entries that are not tensors: {bad[:10]}')
    return clean_state_dict(obj)  # timm's: DDP's `module.` and torch.compile's `_orig_mod.` prefixes stripped
