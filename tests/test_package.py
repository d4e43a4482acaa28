"""The package as installed: no module assumes it lives in a repository checkout (an installed wheel has no
configs/ or data/ beside it), so none climbs from its own `__file__` to a repository folder; paths into a
repository come from the caller (the tools compute theirs from their own `__file__`)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

FRAMEWORKS = ('mmdet', 'mmseg', 'mmpretrain', 'mmcv', 'mmengine', 'transformers', 'cv2', 'detectron2')


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ''


def climbs(tree: ast.AST) -> list[int]:
    """Lines that climb folders: `<path>.parents[i]`, `<path>.parent.parent`, `dirname(dirname(...))`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == 'parents':
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == 'parent'
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == 'parent'
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and _name(node.func) == 'dirname'
            and node.args
            and isinstance(node.args[0], ast.Call)
            and _name(node.args[0].func) == 'dirname'
        ):
            lines.append(node.lineno)
    return lines


def test_the_check_sees_each_way_of_climbing():
    for code in (
        'REPO = Path(__file__).resolve().parents[2]',
        'root = here.parent.parent',
        'REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))',
        'r = dirname(dirname(__file__))',
    ):
        assert climbs(ast.parse(code)) == [1], code
    assert climbs(ast.parse('d = osp.dirname(osp.abspath(path))\np = Path(x).parent')) == []


def test_no_module_derives_a_repository_path_from_its_file():
    found = {}
    for path in sorted(Path(REPO, 'mmrecvit').rglob('*.py')):
        lines = climbs(ast.parse(path.read_text()))
        if lines:
            found[str(path.relative_to(REPO))] = lines
    assert not found, f'modules that climb folders to a repository (take the path from the caller): {found}'


def test_every_package_module_fits_in_400_lines_and_the_readme_in_200():
    """Issue 27: each module reads in one sitting; long tables live in docs/, design notes in docs/methods/."""
    long = {
        str(p.relative_to(REPO)): n
        for p in Path(REPO, 'mmrecvit').rglob('*.py')
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long
    assert len(Path(REPO, 'README.md').read_text().splitlines()) <= 200


def test_each_method_file_opens_with_a_short_docstring_naming_its_note():
    notes = {'vit': 'baselines', 'srvit': 'srvit', 'revit': 'revit', 'edge_recvit': 'edge_recvit', 'mor_vit': 'mor_vit'}
    for module, note in notes.items():
        doc = ast.get_docstring(ast.parse(Path(REPO, 'mmrecvit', 'models', f'{module}.py').read_text()))
        assert doc and len(doc.splitlines()) <= 20 and f'docs/methods/{note}.md' in doc, module
        assert Path(REPO, 'docs', 'methods', f'{note}.md').is_file(), note


def test_the_package_configs_and_docs_cite_their_own_method_notes_never_the_spec_outside_the_repository():
    files = [
        *Path(REPO, 'mmrecvit').rglob('*.py'),
        *Path(REPO, 'configs').rglob('*.py'),
        *Path(REPO, 'docs').rglob('*.md'),
    ]
    files.append(Path(REPO, 'README.md'))
    cited = {str(p.relative_to(REPO)) for p in files if 'SPEC §' in p.read_text() or 'SPEC.md' in p.read_text()}
    assert not cited, cited


@pytest.mark.subprocess
def test_import_mmrecvit_adds_nothing_to_what_timm_imports_but_itself():
    """Issue 47.1: a timm user's `import mmrecvit` (every framework installed here) imports no top-level module that
    `import timm` does not, but mmrecvit: none of OpenMMLab, transformers, cv2 or detectron2; and timm builds our
    models after it, still without them."""
    code = (
        'import sys, timm, torch\n'
        'before = {m.partition(".")[0] for m in sys.modules}\n'
        'import mmrecvit\n'
        'print(*sorted({m.partition(".")[0] for m in sys.modules} - before))\n'
        "with torch.device('meta'):\n"
        "    print(type(timm.create_model('srvit_small_patch16_224')).__name__)\n"
        f'print(*[m for m in {FRAMEWORKS} if m in sys.modules])\n'
    )
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines() == ['mmrecvit', 'RecViTClassifier', ''], res.stdout
