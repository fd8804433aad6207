"""What `pgeval tune` found: every configuration's in-sample figures, the cross-validated
choice, the recommendation (or "keep"), the stored pick; ``as_dict()`` is the JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import select
from .stage_lists import StageLists


@dataclass(frozen=True)
class TuneResult:
    lists: StageLists
    metric: str
    measures: list[str]  # the metric, recall@10, mrr@20, judged@10: the in-sample columns
    queries: list[str]  # the valid queries, in byte order (the folds name them)
    configs: list[dict[str, Any]]
    means: Any  # np.ndarray [config, measure]
    in_sample_best: int
    held_out: select.HeldOut
    keep: bool
    why: str
    run: str | None = None
    warnings: list[str] = field(default_factory=list)

    def options(self, i: int) -> dict[str, Any]:
        """Configuration ``i`` as JSON: per-input values keyed by input stage."""
        out = {}
        for key, value in self.configs[i].items():
            if isinstance(value, tuple):
                value = dict(zip(self.lists.inputs, value))
            out[key] = value
        return out

    @property
    def recommended(self) -> int:
        return 0 if self.keep else self.in_sample_best

    def as_dict(self) -> dict[str, Any]:
        lists = self.lists
        return {
            "experiment": lists.experiment,
            "stage": lists.stage,
            "kind": lists.kind,
            "run": lists.run_name,
            "repetition": lists.repetition,
            "metric": self.metric,
            "queries": len(self.held_out.values),
            "current": self.options(0),
            "configs": [
                {
                    "options": self.options(i),
                    "in_sample": dict(zip(self.measures, map(float, self.means[i]))),
                }
                for i in range(len(self.configs))
            ],
            "in_sample_best": self.in_sample_best,
            "held_out": self.held_out.as_dict(self.queries),
            "recommendation": {
                "keep": self.keep,
                "options": self.options(self.recommended),
                "opts": lists.as_opts(self.configs[self.recommended]),
                "why": self.why,
            },
            "stored_run": self.run,
            "warnings": self.warnings,
        }
