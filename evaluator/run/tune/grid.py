"""The grid of `pgeval tune`: ``--grid STAGE:KEY=V1,V2,...`` parsed into the configurations to try.

Values are separated by commas; a value that is a list (merge ``weights``, per-input
``input_depth``) is bracketed: ``merge:weights=[1,0.5],[1,1]``, ``merge:input_depth=20,[10,50]``
(a bare number: every input), names allowed inside the brackets (``[hnsw:1,bm25:0.5]``). Each
option's value is checked as the stage checks it (:mod:`evaluator.stages.merge`)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from ...core.errors import InputError
from ...stages.merge import METHODS, parse_input_depth, parse_weights

KEYS = {
    "merge": ("method", "k", "weights", "input_depth", "depth"),
    "rerank": ("top_n",),
}
_SPEC = re.compile(r"^([A-Za-z0-9_-]+):([A-Za-z_]+)=(.+)$")
_ITEM = re.compile(r"\s*(\[[^\]]*\]|[^,\[\]]+)\s*(?:,|$)")


def _fail(spec: str, why: str) -> InputError:
    return InputError(f"--grid '{spec}': {why}", field="--grid")


def split_values(spec: str, text: str) -> list[str]:
    """'1,[2,3],4' -> ['1', '[2,3]', '4']; a bracket left open, an empty value: refused."""
    out, pos = [], 0
    while pos < len(text):
        m = _ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise _fail(spec, f"cannot read the values from position {pos + 1} ('{text[pos:]}')")
        out.append(m.group(1).strip())
        pos = m.end()
    if text.rstrip().endswith(",") or not out:
        raise _fail(spec, "an empty value")
    return out


def _number(cast: Callable[[str], Any], low: float) -> Callable[[str, list[str]], Any]:
    def read(value: str, inputs: list[str]) -> Any:
        out = cast(value)
        if out < low or out != out:
            raise ValueError(f"must be >= {low:g}")
        return out

    return read


def _method(value: str, inputs: list[str]) -> str:
    if value.lower() not in METHODS:
        raise ValueError(f"one of {', '.join(METHODS)}")
    return value.lower()


def _listed(parse: Callable[[str, list[str]], dict]) -> Callable[[str, list[str]], Any]:
    def read(value: str, inputs: list[str]) -> Any:
        inner = value[1:-1] if value.startswith("[") and value.endswith("]") else value
        return tuple(parse(inner, inputs)[n] for n in inputs)

    return read


READERS: dict[str, Callable[[str, list[str]], Any]] = {
    "method": _method,
    "k": _number(float, 0.0),
    "weights": _listed(parse_weights),
    "input_depth": _listed(parse_input_depth),
    "depth": _number(int, 1),
    "top_n": _number(int, 1),
}


def parse(specs: Sequence[str], stage: str, kind: str, inputs: list[str]) -> dict[str, list]:
    """{key: [values]} from the ``--grid`` specs of stage ``stage`` (of ``kind``); the order of
    keys and values is the order given, a value given twice is tried once."""
    grid: dict[str, list] = {}
    for spec in specs:
        m = _SPEC.match(spec.strip())
        if m is None:
            raise _fail(spec, "expected STAGE:KEY=V1,V2,... (e.g. merge:k=10,60)")
        name, key, text = m.groups()
        if name != stage:
            raise _fail(spec, f"names stage '{name}', but --stage is '{stage}'")
        if key not in KEYS[kind]:
            raise _fail(spec, f"unknown key '{key}' for a {kind} stage ({', '.join(KEYS[kind])})")
        if key in grid:
            raise _fail(spec, f"key '{key}' is given twice")
        values = []
        for value in split_values(spec, text):
            try:
                values.append(READERS[key](value, inputs))
            except (ValueError, InputError) as exc:
                why = exc.detail if isinstance(exc, InputError) else str(exc)
                raise _fail(spec, f"{key}={value}: {why}") from None
        grid[key] = list(dict.fromkeys(values))
    return grid


def configurations(grid: dict[str, list], current: dict[str, Any]) -> list[dict[str, Any]]:
    """The experiment's own configuration ``current`` first, then every combination of the grid
    (keys not in the grid keep their current value); a combination equal to one already listed
    (k does not matter to score fusion) is listed once."""
    keys = list(grid)
    out, seen = [], set()
    for combo in itertools.chain([()], itertools.product(*(grid[k] for k in keys))):
        options = {**current, **dict(zip(keys, combo))}
        if options.get("method", "rrf") != "rrf":
            options["k"] = None  # RRF's constant: no part of score fusion
        key = tuple(sorted(options.items()))
        if key not in seen:
            seen.add(key)
            out.append(options)
    return out
