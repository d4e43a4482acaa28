"""Every difference of a recipe from the reference, declared with its value (tools/analysis_tools/compare.py).

A recipe declares in its `recipe` data (beside recipe_diff's `intended`; a method's own part comes from its backbone
file's `backbone_recipe`, configs/_base_/backbones/):

    differs = {key: (value, why)}       a fact (`mm/card.py`) that differs from the reference's, and its value here;
                                        a dict value declares a subtree (a hook: every key under `key`)
    differs = {key: why}                for a `MEASURED` fact (GFLOPs, lr scale, ...: they depend on the task's
                                        sizes), the why with the method; the value under the recipe's file name
                                        in configs/measured.yml (`card.MEASURED_TABLE`), `row.recipe['measured']`
    differs = {'paper_start': (made_by, why)}   a start other than `paper_start` (the backbone file's: the recipe
                                        that makes the start its paper uses, or 'DeiT release'), and which it is
    differs = {key: None}               withdraws an entry of a base (mmengine merges the dicts)

`check` finds what a card must not hide: a difference not declared, declared with another value (a changed value
fails), a `MEASURED` difference whose value the recipe does not give, a declaration of a key that does not differ
(stale: a measured value; a `MEASURED` why alone is the method's reason where a task shows it), a start that is not
its paper's undeclared; `Finding.kind` says which.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .card import MEASURED, MEASURED_TABLE, Row
from .config_diff import ABSENT, flatten

PAPER_START = 'paper_start'
KINDS = ('NOT DECLARED', 'WRONG VALUE', 'NO VALUE', 'STALE', 'NOT ITS PAPER START', 'BAD ENTRY')


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS, or 'declared'
    recipe: str
    key: str
    value: Any
    text: str  # the why (declared), or what is wrong


def norm(value: Any) -> Any:
    """Values as a config and a flattened config both hold them: tuples as lists, mappings as dicts."""
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [norm(v) for v in value]
    return value


def declarations(row: Row) -> tuple[dict[str, tuple[Any, str]], list[Finding]]:
    """{fact key: (declared value (ABSENT: none given), why)} of a row, subtrees expanded; and malformed entries."""
    differs = {k: v for k, v in (row.recipe.get('differs') or {}).items() if v is not None}
    measured = row.recipe.get('measured') or {}
    out: dict[str, tuple[Any, str]] = {}
    bad = [
        Finding('BAD ENTRY', row.name, k, v, f'its {k!r} in {MEASURED_TABLE} has no why in recipe.differs')
        for k, v in measured.items()
        if k not in differs
    ]
    for key, entry in differs.items():
        if isinstance(entry, str) and key in MEASURED:
            out[key] = (measured.get(key, ABSENT), entry)
        elif isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[1], str):
            value, why = entry
            leaves = flatten(norm(value), key) if isinstance(value, dict) else {key: value}
            out.update({k: (v, why) for k, v in leaves.items()})
        else:
            want = f'a why (its value in {MEASURED_TABLE})' if key in MEASURED else '(value, why)'
            bad.append(Finding('BAD ENTRY', row.name, key, entry, f'recipe.differs[{key!r}] must be {want}'))
    return out, bad


def check(rows: Sequence[Row], measured: bool = True) -> list[Finding]:
    """Every declared difference of `rows[1:]` from `rows[0]` and everything wrong (module docstring); `measured=False`
    for rows without their `MEASURED` facts (`recipe_row(measure=False)`): those are left out of the check."""
    ref, found = rows[0], []
    for i, row in enumerate(rows):
        declared, bad = declarations(row)
        if not measured:
            declared = {k: v for k, v in declared.items() if k not in MEASURED}
        found += bad
        found += paper_start(row, declared.pop(PAPER_START, None))
        if i == 0:
            continue
        keys = sorted(set(row.facts) | set(ref.facts))
        differing = [k for k in keys if norm(row.facts.get(k, ABSENT)) != norm(ref.facts.get(k, ABSENT))]
        for key in differing:
            ours, theirs = row.facts.get(key, ABSENT), ref.facts.get(key, ABSENT)
            if key not in declared:
                found.append(Finding('NOT DECLARED', row.name, key, ours, f'the reference: {theirs!r}'))
                continue
            value, why = declared.pop(key)
            if value is ABSENT:
                found.append(Finding('NO VALUE', row.name, key, ours, f'no {key!r} of it in {MEASURED_TABLE} ({why})'))
            elif norm(value) != norm(ours):
                found.append(Finding('WRONG VALUE', row.name, key, ours, f'declared {value!r} ({why})'))
            else:
                found.append(Finding('declared', row.name, key, ours, why))
        found += [  # a MEASURED why without a value: the method's reason, for the tasks where it shows
            Finding('STALE', row.name, k, v, f'declared, but it does not differ from the reference ({why})')
            for k, (v, why) in declared.items()
            if not (k in MEASURED and v is ABSENT)
        ]
    return found


def paper_start(row: Row, declared: tuple[Any, str] | None) -> list[Finding]:
    """A start that is not the one the row's backbone file names (`paper_start`) must be declared, with which."""
    paper = row.recipe.get(PAPER_START)
    ours = row.facts.get('start.made_by', row.facts.get('start.checkpoint'))
    if paper is None or ours == paper:
        if declared is not None:
            return [Finding('STALE', row.name, PAPER_START, declared[0], "declared, but its start is its paper's")]
        return []
    if declared is None:
        return [Finding('NOT ITS PAPER START', row.name, PAPER_START, ours, f'its paper starts from {paper}')]
    if declared[0] != ours:
        return [Finding('WRONG VALUE', row.name, PAPER_START, ours, f'declared {declared[0]!r} ({declared[1]})')]
    return [Finding('declared', row.name, PAPER_START, ours, f"not its paper's start ({paper}): {declared[1]}")]
