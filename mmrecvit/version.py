"""The package's version (OpenMMLab's `version.py`): a module of its own so every layer can read it without
importing the package's `__init__`."""

__version__ = '0.1.0'
