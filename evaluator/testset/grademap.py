"""Grade maps: source relevance codes onto pgeval's grades 0-3 (``--grade-map 1=3,2=2,3=1,4=0,-1=0``).

Without a map a source grade must already be an integer 0-3. With a map every source code must be
listed in it; the map is recorded with the test set (``pgeval.testset.grade_map``) and is part of
the content hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.errors import InputError, param

if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_GRADE = 3


@dataclass
class GradeMap:
    """``codes``: source code -> grade 0-3, or None for no map (grades taken as written)."""

    codes: dict[int, int] | None = None
    _seen: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def parse(cls, spec: str | dict | GradeMap | None) -> GradeMap:
        """'1=3,2=2,-1=0' or {1: 3, "2": 2} or None."""
        if spec is None or isinstance(spec, GradeMap):
            return spec or cls()
        items = spec.items() if isinstance(spec, dict) else _split_spec(spec)
        codes: dict[int, int] = {}
        for key, value in items:
            code, grade = _int(key, "source code"), _int(value, "grade")
            if not 0 <= grade <= MAX_GRADE:
                raise InputError(
                    f"code {code} maps to {grade}, outside 0-{MAX_GRADE}", field=param("grade_map")
                )
            if code in codes and codes[code] != grade:
                raise InputError(
                    f"code {code} is mapped twice ({codes[code]} and {grade})",
                    field=param("grade_map"),
                )
            codes[code] = grade
        if not codes:
            raise InputError(
                "is empty; write it as CODE=GRADE,... e.g. 1=3,2=2,3=1,4=0,-1=0",
                field=param("grade_map"),
            )
        return cls(codes)

    def as_json(self) -> dict[str, int] | None:
        return None if self.codes is None else {str(k): v for k, v in sorted(self.codes.items())}

    def spec(self) -> str | None:
        return (
            None
            if self.codes is None
            else ",".join(f"{k}={v}" for k, v in sorted(self.codes.items()))
        )

    def lookup(self, value: object) -> tuple[int, str]:
        """:meth:`grade` with a cache of the source grades already seen (the hot path)."""
        kind = type(value)
        if kind is int or kind is str:  # never bool or float: True == 1 and 1.0 == 1 hash alike
            hit = self._seen.get(value)
            if hit is None:
                hit = self.grade(value)
                if len(self._seen) < 1000:
                    self._seen[value] = hit
            return hit
        return self.grade(value)

    def grade(self, value: object) -> tuple[int, str]:
        """Map one source grade (int or integer string) to (grade 0-3, source code as text).
        Raises ValueError with the user-facing reason; callers add file, line and field."""
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"grade {_show(value)} is not an integer")
        if isinstance(value, str):
            try:
                code = int(value.strip())
            except ValueError:
                raise ValueError(f"grade {_show(value)} is not an integer") from None
        else:
            code = value
        if self.codes is None:
            if not 0 <= code <= MAX_GRADE:
                raise ValueError(
                    f"grade {code} is outside 0-{MAX_GRADE} (map source codes "
                    "with --grade-map, e.g. 1=3,2=2,3=1,4=0,-1=0)"
                )
            return code, str(code)
        grade = self.codes.get(code)
        if grade is None:
            raise ValueError(f"grade code {code} is not in the grade map ({self.spec()})")
        return grade, str(code)


def _split_spec(spec: str) -> Iterator[tuple[str, str]]:
    for item in str(spec).split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(
                f"item '{item}' is not CODE=GRADE (e.g. 1=3,2=2,3=1,4=0,-1=0)",
                field=param("grade_map"),
            )
        yield key, value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise InputError(f"{what} {value!r} is not an integer", field=param("grade_map"))
    try:
        return int(str(value).strip())
    except ValueError:
        raise InputError(f"{what} '{value}' is not an integer", field=param("grade_map")) from None


def _show(value: object) -> str:
    from .fields import show

    return f"'{show(value, 40)}'" if isinstance(value, str) else show(value, 40)
