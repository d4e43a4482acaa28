"""Build hook (the project is declared in pyproject.toml): a wheel carries configs/ inside the package, as
`mmrecvit/.mim/configs/` (where OpenMMLab packages ship theirs), taken by glob so that new recipes come along, with
the model index beside them (`model-index.yml`, `metafile.yml`: mim's layout, read by mmrecvit/mm/model_index.py), and
`mmrecvit-import-hook.pth` at the top of site-packages, the line that installs `_mmrecvit_import_hook` (a module
of its own there, pyproject.toml) at interpreter start: mmcv-lite's ops and mmpretrain found whatever is imported
first. An editable install reads the configs in the checkout instead (mmrecvit/configs.py) and gets the `.pth`
from scripts/setup.sh."""

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

IMPORT_HOOK = runpy.run_path('_mmrecvit_import_hook.py')  # standard library only


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
        Path(self.build_lib).mkdir(parents=True, exist_ok=True)
        IMPORT_HOOK['write_pth'](self.build_lib)  # top level of the wheel's purelib: site-packages

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        extra = [] if self.editable_mode else [str(Path(self.build_lib, IMPORT_HOOK['PTH_NAME']))]
        return super().get_outputs(include_bytecode) + extra


setup(cmdclass={'build_py': BuildPyWithConfigs})
