"""One name per meaning (docs/methods/README.md, "One vocabulary"): the retired names are accepted with a warning and
the same meaning, and no file of the package, its configs, tools or docs writes them again."""

import re
import warnings
from pathlib import Path

import pytest
import torch
from helpers import REPO as ROOT

from mmrecvit.models import BACKBONES
from mmrecvit.models.arguments import RETIRED

TINY = dict(arch='tiny', depth=4)
# (backbone, retired argument, its value, the argument now)
REPO = Path(ROOT)
RENAMES = [
    ('NaiveRecursiveViT', 'timm_init', 'pick', 'shared_init'),
    ('SRViT', 'timm_init', 'fresh', 'router_init'),
    ('ReViT', 'timm_init', 'middle', 'shared_init'),
    ('ReViT', 'timm_gates', 'uniform', 'router_init'),
    ('MoRViT', 'timm_init', 'pick', 'shared_init'),
    ('MoRViT', 'timm_gates', 'fresh', 'router_init'),
]


def build(name, **kwargs):
    sizes = dict(arch='tiny', num_recursions=2, unit_size=1) if name == 'MoRViT' else TINY
    if name == 'SRViT':
        sizes = dict(TINY, unit_sizes=(2, 2), num_recursions=2)
    if name == 'NaiveRecursiveViT':
        sizes = dict(TINY, num_blocks=2)
    return BACKBONES[name](**sizes, **kwargs)


@pytest.mark.parametrize('name, old, value, new', RENAMES)
def test_a_retired_argument_warns_and_means_what_its_new_name_means(name, old, value, new):
    with pytest.warns(DeprecationWarning, match=f"'{old}' is deprecated; use '{new}'"):
        model = build(name, **{old: value})
    assert getattr(model, new) == value and not hasattr(model, old)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert getattr(build(name, **{new: value}), new) == value


@pytest.mark.parametrize('name, old, value, new', RENAMES)
def test_a_retired_and_a_new_spelling_that_disagree_is_one_error_naming_both(name, old, value, new):
    default = build(name)
    other = next(v for v in ('cycle', 'average', 'function', 'programmed', 'open') if v != getattr(default, new))
    with pytest.raises(TypeError, match=f'{old}={value!r} \\(retired\\) and {new}={other!r} disagree'):
        with pytest.warns(DeprecationWarning):
            build(name, **{old: value, new: other})


def test_no_file_writes_a_retired_name():
    """Every retired name is gone from the package, configs, tools, tests and docs, but where it is accepted or
    listed as retired (the `renamed` calls, `RETIRED`, the docs' table and this test)."""
    pattern = re.compile(r'\b(' + '|'.join(map(re.escape, RETIRED)) + r')\b')
    allowed = {'mmrecvit/models/arguments.py', 'docs/methods/README.md', 'tests/models/test_vocabulary.py'}
    found = []
    sources = [('mmrecvit', '.py'), ('configs', '.py'), ('tools', '.py'), ('tests', '.py'), ('docs', '.md')]
    for folder, suffix in sources:
        for path in sorted((REPO / folder).rglob(f'*{suffix}')):
            rel = path.relative_to(REPO).as_posix()
            if rel in allowed:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line) and not re.search(r'\brenamed\(', line):
                    found.append(f'{rel}:{n}: {line.strip()}')
    assert not found, 'retired names (RETIRED in mmrecvit/models/arguments.py):\n' + '\n'.join(found)


def test_the_renamed_arguments_build_the_same_model():
    """The rename changes no computation: the retired spelling and the new one give equal outputs."""
    for name, old, value, new in RENAMES:
        torch.manual_seed(0)
        with pytest.warns(DeprecationWarning):
            a = build(name, **{old: value}).eval()
        torch.manual_seed(0)
        b = build(name, **{new: value}).eval()
        x = torch.randn(1, 3, 64, 64)
        for p, q in zip(a(x), b(x)):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
