"""One finding of a health check (:mod:`.health`): its status, a count and example chunk ids."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Finding:
    check: str
    status: str  # ok | hint (slower, never wrong: not a --strict failure) | warning | error
    count: int
    detail: str
    examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)
