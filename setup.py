"""Build hook (the project is declared in pyproject.toml): a wheel carries configs/ inside the package, as
`mmrecvit/.mim/configs/` (where OpenMMLab packages ship theirs), taken by glob so that new recipes come along, and
the model index beside them (`model-index.yml`, `metafile.yml`: mim's layout, read by mmrecvit/mm/model_index.py).
An editable install reads them in the checkout instead (mmrecvit/configs.py)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the package stays in the checkout, beside configs/
            return
        for src in [Path('model-index.yml'), Path('metafile.yml'), *sorted(Path('configs').rglob('*'))]:
            if src.is_file() and '__pycache__' not in src.parts:
                target = Path(self.build_lib, 'mmrecvit', '.mim', src)
                self.mkpath(str(target.parent))
                self.copy_file(str(src), str(target))


setup(cmdclass={'build_py': BuildPyWithConfigs})
