"""What a tool was given, checked before any work: one line naming the argument and what is wrong with it.

    parser = tool_parser('tools/analysis_tools/visualize_depth.py', __doc__)  # the tools' shared parser
    with bad_input(parser.prog):
        config = config_file(args.config)                 # exists, a config mmengine reads
        checkpoint = checkpoint_file(args.checkpoint)     # None for 'none'; exists, looks like a checkpoint
        images = [image_file(p) for p in args.images]    # exist, an image OpenCV reads

A refused input raises an `InputError`; `bad_input` prints it, and every other `ArgumentError` (a constructor
argument's name or value, `models/checks.py`; an unknown registry `type`) and `CheckpointError` (a checkpoint that
cannot be read or does not match the model), as `<tool>: error: <message>` and exits with status 2, as argparse
does for a bad flag. Anything else keeps its traceback: it is not the user's input that is wrong.

The checks read a file's first bytes, never the whole file: a checkpoint is a zip archive (torch.save), a pickle
(torch's legacy format) or a safetensors header; an image is what OpenCV has a reader for (`cv2.haveImageReader`,
the library mmcv's `LoadImageFromFile` decodes with).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

from .configs import config_path
from .models.checkpoint import CheckpointError
from .models.checks import ArgumentError

CONFIG_SUFFIXES = ('.py', '.json', '.yaml', '.yml')  # what mmengine's Config.fromfile reads
NONE = 'none'  # the checkpoint argument meaning "random initialisation"
IMAGE_MAGIC = ((b'\x89PNG', 'PNG'), (b'\xff\xd8\xff', 'JPEG'), (b'GIF8', 'GIF'), (b'BM', 'BMP'), (b'II*\x00', 'TIFF'))


def tool_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """A tool's argument parser: `prog` (the tool as run from the repository), its docstring's first paragraph as
    the description and the rest (usage, examples) as the epilog, kept as written."""
    summary, _, details = doc.partition('\n\n')
    return argparse.ArgumentParser(
        prog=prog, description=summary, epilog=details, formatter_class=argparse.RawDescriptionHelpFormatter
    )


class InputError(ArgumentError, ValueError):
    """A file argument that cannot be what the tool needs."""


@contextlib.contextmanager
def bad_input(tool: str) -> Iterator[None]:
    """Inside: bad input (`InputError`, `ArgumentError`, `CheckpointError`) ends the tool with one line, status 2."""
    try:
        yield
    except (ArgumentError, CheckpointError) as e:
        print(f'{tool}: error: {e}', file=sys.stderr)
        raise SystemExit(2) from e


def existing_file(path: str | os.PathLike, arg: str) -> str:
    """`path` if it is a file, else an `InputError` naming `arg`."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise InputError(f'{arg} {path!r} is a folder, not a file')
    if not os.path.isfile(path):
        raise InputError(f'{arg} {path!r}: no such file')
    return path


def config_file(path: str | os.PathLike, arg: str = 'CONFIG') -> str:
    """A config file mmengine can read (by its suffix; `mmrecvit::<folder>/<file>.py` names one of the installed
    configs, `mmrecvit.configs`), else an `InputError` naming `arg` and what the file is."""
    try:
        path = config_path(os.fspath(path))
    except FileNotFoundError as e:  # an installed config's name that is not one (the closest is named)
        raise InputError(f'{arg} {e}') from e
    path = existing_file(path, arg)
    if not path.endswith(CONFIG_SUFFIXES):
        raise InputError(f'{arg} {path!r} is {describe(path)}, not a config ({", ".join(CONFIG_SUFFIXES)})')
    return path


def checkpoint_file(path: str | os.PathLike, arg: str = 'CHECKPOINT', allow_none: bool = True) -> str | None:
    """None for 'none' (when allowed); else a file that starts like a checkpoint, or an `InputError` naming `arg`
    and what the file is instead (a photo given where the checkpoint goes, a config, ...)."""
    if allow_none and os.fspath(path).lower() == NONE:
        return None
    if '://' in os.fspath(path):
        return os.fspath(path)  # a remote file (http://, s3://, ...): mmengine's loaders fetch and check it
    path = existing_file(path, arg)
    with open(path, 'rb') as f:
        head = f.read(16)
    if not looks_like_checkpoint(head):
        what = describe(path)
        hint = f'; pass a .pth/.safetensors file{" or none (random weights)" if allow_none else ""}'
        raise InputError(f'{arg} {path!r} is {what}, not a checkpoint{hint}')
    return path


def image_file(path: str | os.PathLike, arg: str = 'IMAGE') -> str:
    """An image file OpenCV can decode (by its header), else an `InputError` naming `arg` and what the file is."""
    path = existing_file(path, arg)
    if not is_image(path):
        raise InputError(f'{arg} {path!r} is {describe(path)}, not an image OpenCV reads (JPEG, PNG, BMP, TIFF, ...)')
    return path


def looks_like_checkpoint(head: bytes) -> bool:
    """The first bytes of a torch.save zip archive, a pickle (torch's legacy format) or a safetensors file."""
    if head.startswith(b'PK\x03\x04') or head[:1] == b'\x80':
        return True
    # safetensors: an 8-byte little-endian header length, then the JSON header
    return len(head) > 8 and head[8:9] == b'{' and 0 < int.from_bytes(head[:8], 'little') < 1 << 32


def is_image(path: str) -> bool:
    import cv2  # here: the core imports without OpenCV

    return bool(cv2.haveImageReader(path))


def describe(path: str) -> str:
    """What a file is, in a few words, for the error messages: 'a PNG image', 'a text file', 'an empty file'."""
    with open(path, 'rb') as f:
        head = f.read(1024)
    if not head:
        return 'an empty file'
    if is_image(path):
        kind = next((name for magic, name in IMAGE_MAGIC if head.startswith(magic)), None)
        return f'an image ({kind})' if kind else 'an image'
    if looks_like_checkpoint(head[:16]):
        return 'a checkpoint'
    if b'\x00' in head:
        return 'a binary file of unknown kind'
    return 'a Python file' if path.endswith('.py') else 'a text file'
