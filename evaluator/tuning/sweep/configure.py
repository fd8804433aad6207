"""A sweep's configuration from its options: one function for the command line and the Python
API, so both configure a sweep the same way (and name it the same way); the defaults are
:data:`SWEEP_DEFAULTS`, nowhere else."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...stages import gucs
from .config import SweepConfig

# what `pgeval sweep` does without options (the CLI's option defaults and the API's)
# the sampled rows' bias is measured on copies of every row of the table (tuning/sweep/held_out.py):
# on a 20,000-row copy it read -0.008 where the 200,000-row table's was -0.075 (issue 47)
SWEEP_DEFAULTS = SweepConfig(testset="", target="", stage="", held_out_rows=None)


def grid_items(values: Any) -> tuple:
    """``{"hnsw.ef_search": [10, 20]}`` -> ``("hnsw.ef_search=10,20",)``; strings pass."""
    if values is None:
        return ()
    if isinstance(values, dict):
        return tuple(
            f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
            for k, v in values.items()
        )
    if isinstance(values, str):
        return (values,)
    return tuple(values)


def sweep_config(
    *,
    testset: str | None,
    target: str,
    stage: str,
    params: Any = None,
    build: Any = None,
    settings: Any = None,
    queries: Any = None,
    **fields: Any,
) -> SweepConfig:
    """The :class:`SweepConfig` of `pgeval sweep`'s options (same names; ``params`` and
    ``build`` as a mapping of lists or the CLI's ``NAME=V1,V2`` strings, ``settings`` as in a
    pipeline); what is not given takes :data:`SWEEP_DEFAULTS`."""
    from ...run.configure import settings_items

    if "build_timeout" in fields:  # seconds (the option's name)
        fields["build_timeout_s"] = fields.pop("build_timeout")
    return replace(
        SWEEP_DEFAULTS,
        testset=testset or "",  # a query source names its query set
        queries=queries,
        target=target,
        stage=stage,
        params=grid_items(params),
        build=grid_items(build),
        settings=gucs.parse(settings_items(settings)),
        **fields,
    )
