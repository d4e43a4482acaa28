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


# ---- the layering (issue 47.6; docs/development.md) ----------------------------------------------------------------
# Low to high: a file may import files of its own layer and of lower ones, never of a higher one; within the
# framework layer mm, d2 and timm import none of each other. Paths as the repository has them (a folder: all below).
LAYERS = (
    (
        'core',
        (
            '_mmrecvit_import_hook.py',
            'mmrecvit/models/',
            'mmrecvit/datasets/',
            'mmrecvit/configs.py',
            'mmrecvit/version.py',
        ),
    ),
    ('adapters', ('mmrecvit/adapters.py', 'mmrecvit/inputs.py', 'mmrecvit/deploy.py')),
    ('frameworks', ('mmrecvit/mm/', 'mmrecvit/d2/', 'mmrecvit/timm/')),
    ('package', ('mmrecvit/__init__.py',)),
    ('harness', ('mmrecvit/benchmark/',)),
    ('tools', ('tools/', 'scripts/')),
)


def layer_of(path: str) -> tuple[int, str]:
    """(rank, the LAYERS entry's path that holds `path`), the longest entry that does."""
    found = [(len(p), rank, p) for rank, (_, paths) in enumerate(LAYERS) for p in paths if path.startswith(p)]
    if not found:
        raise AssertionError(f'{path} is on no layer of LAYERS')
    _, rank, entry = max(found)
    return rank, entry


def module_file(root: Path, dotted: str) -> Path | None:
    """The file of module `dotted` in the repository, None outside it (torch, timm, ...)."""
    base = root.joinpath(*dotted.split('.'))
    for candidate in (base / '__init__.py', base.with_suffix('.py')):
        if candidate.is_file():
            return candidate
    return None


def imported_files(root: Path, path: Path) -> set[Path]:
    """The repository's files `path` imports anywhere in it (also inside functions and `TYPE_CHECKING`), a name
    that a package's `__init__` hands on taken to the file of the package that defines it."""
    package = '.'.join(path.relative_to(root).parent.parts)  # what a relative import starts from
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {f for a in node.names if (f := module_file(root, a.name))}
        elif isinstance(node, ast.ImportFrom):
            base = package.split('.')[: len(package.split('.')) - node.level + 1] if node.level else []
            dotted = '.'.join([*base, *([node.module] if node.module else [])])
            target = module_file(root, dotted)
            for alias in node.names if target else ():
                sub = module_file(root, f'{dotted}.{alias.name}')
                found.add(sub or handed_on(root, target, alias.name))
    found.discard(path)
    return found


def handed_on(root: Path, init: Path, name: str) -> Path:
    """The file a package's `__init__` takes `name` from (`from .sub import name`), else the `__init__` itself."""
    if init.name != '__init__.py':
        return init
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and any(a.name == name for a in node.names):
            return module_file(root, '.'.join([*init.parent.relative_to(root).parts, node.module])) or init
    return init


def import_graph(root: Path) -> dict[str, set[str]]:
    files = [root / '_mmrecvit_import_hook.py', *root.glob('mmrecvit/**/*.py')]
    files += [*root.glob('tools/**/*.py'), *root.glob('scripts/*.py')]
    rel = {f: str(f.relative_to(root)) for f in files}
    return {rel[f]: {str(t.relative_to(root)) for t in imported_files(root, f)} for f in files}


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run up a layer, or across the framework layer; and the import cycles."""
    found = []
    for src, targets in sorted(graph.items()):
        (rank, entry) = layer_of(src)
        for dst in sorted(targets):
            (to_rank, to_entry) = layer_of(dst)
            if to_rank > rank:
                found.append(f'{src} -> {dst}: up from {LAYERS[rank][0]} to {LAYERS[to_rank][0]}')
            elif to_rank == rank and LAYERS[rank][0] == 'frameworks' and to_entry != entry:
                found.append(f'{src} -> {dst}: across the frameworks ({entry} -> {to_entry})')
    index, low, stack, on_stack, counter = {}, {}, [], set(), [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components: a component of two or more is a cycle
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(f'cycle: {" <-> ".join(sorted(component))}')

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_layering_check_sees_an_upward_import_a_crossing_and_a_cycle():
    graph = {
        'mmrecvit/models/a.py': {'mmrecvit/mm/registry.py'},  # core -> frameworks: up
        'mmrecvit/mm/registry.py': {'mmrecvit/timm/entrypoints.py'},  # mm -> timm: across
        'mmrecvit/benchmark/machine.py': {'mmrecvit/benchmark/timing.py'},
        'mmrecvit/benchmark/timing.py': {'mmrecvit/benchmark/machine.py', 'mmrecvit/models/a.py'},  # a cycle
    }
    found = violations(graph)
    assert found == [
        'mmrecvit/mm/registry.py -> mmrecvit/timm/entrypoints.py: across the frameworks '
        '(mmrecvit/mm/ -> mmrecvit/timm/)',
        'mmrecvit/models/a.py -> mmrecvit/mm/registry.py: up from core to frameworks',
        'cycle: mmrecvit/benchmark/machine.py <-> mmrecvit/benchmark/timing.py',
    ], found


def test_no_import_runs_up_a_layer_or_in_a_cycle():
    """Issue 47.6: models < adapters < mm/d2/timm < the package < benchmark < tools (`LAYERS`), no cycle."""
    graph = import_graph(Path(REPO))
    assert graph['mmrecvit/mm/compat.py'] >= {'mmrecvit/configs.py', '_mmrecvit_import_hook.py'}  # it reads them
    assert not violations(graph), '\n'.join(violations(graph))
