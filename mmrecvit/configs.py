"""The recipes installed with the package: `mmrecvit::<folder>/<file>.py` names a file of the repository's configs/.

A wheel carries configs/ as `mmrecvit/.mim/configs/` (setup.py, as OpenMMLab packages ship theirs in `.mim/`); an
editable install (`pip install -e .`, `make setup`) reads them in its checkout, which pip records in the
distribution's `direct_url.json` (PEP 610). Our tools take such names (`tools/train.py mmrecvit::det/<file>.py`), and
with `import mmrecvit.mm` so does an mmengine config's `_base_` (`mmrecvit.mm.compat` fix 8):

    _base_ = ['mmrecvit::det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py']
"""

from __future__ import annotations

import difflib
import functools
import glob
import importlib.metadata
import json
import os.path as osp
from urllib.parse import unquote, urlparse

SCOPE = 'mmrecvit::'


@functools.cache
def configs_root() -> str:
    """The folder of the installed configs (its `det/`, `seg/`, `cls/`, `d2/`)."""
    packaged = osp.join(osp.dirname(osp.abspath(__file__)), '.mim', 'configs')
    if osp.isdir(packaged):
        return packaged
    try:
        direct_url = json.loads(importlib.metadata.distribution('mmrecvit').read_text('direct_url.json') or '{}')
    except importlib.metadata.PackageNotFoundError:
        direct_url = {}
    if direct_url.get('dir_info', {}).get('editable') and direct_url.get('url', '').startswith('file:'):
        checkout = osp.join(unquote(urlparse(direct_url['url']).path), 'configs')
        if osp.isdir(checkout):
            return checkout
    raise FileNotFoundError(
        f'no configs installed with mmrecvit ({packaged} does not exist and the package is not an editable install '
        'of a checkout): install a wheel built from the repository, or pip install -e <checkout>'
    )


def config_path(name: str) -> str:
    """`mmrecvit::det/<file>.py` -> that file among the installed configs; any other name is returned as it is."""
    if not name.startswith(SCOPE):
        return name
    root, relative = configs_root(), name[len(SCOPE) :]
    path = osp.join(root, relative)
    if not osp.isfile(path):
        known = [osp.relpath(p, root) for p in glob.glob(osp.join(root, '**', '*.py'), recursive=True)]
        close = difflib.get_close_matches(relative, known, n=1)
        raise FileNotFoundError(
            f'{name!r}: no such config under {root}' + (f'; closest: {SCOPE}{close[0]}' if close else '')
        )
    return path
