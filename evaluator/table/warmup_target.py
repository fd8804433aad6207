"""`pgeval warmup`'s use case: a stored target warmed up with a test set's query vectors or seeded
random ones, under the settings given (scoped to one stage at most) on top of the target's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.db import Database
from ..core.errors import InputError, param
from . import warmup as wu


@dataclass(frozen=True)
class WarmupDefaults:
    k: int = 10
    max_passes: int = wu.MAX_PASSES
    tolerance: float = wu.TOLERANCE
    random_queries: int = wu.RANDOM_QUERIES


# what `pgeval warmup` does without options (the CLI's option defaults and the API's)
WARMUP_DEFAULTS = WarmupDefaults()


def warmup_target(
    database: Database,
    target_name: str,
    *,
    testset: str | None = None,
    embedder: str | None = None,
    settings: Any = (),
    k: int = WARMUP_DEFAULTS.k,
    max_passes: int = WARMUP_DEFAULTS.max_passes,
    tolerance: float = WARMUP_DEFAULTS.tolerance,
    random_queries: int = WARMUP_DEFAULTS.random_queries,
    use_prewarm: bool = True,
    on_pass: Any = None,
    index: str | None = None,
) -> wu.WarmupReport:
    """Warm target ``target_name`` up (see :func:`evaluator.table.warmup.warmup`); ``settings``
    are ``--set`` items (``[STAGE:]GUC=VALUE``) of one stage at most."""
    from ..kinds.registry import vector_kinds
    from ..stages import gucs
    from ..stages.gucs import settings_items
    from ..targets.targets import load

    parsed = gucs.parse(settings_items(settings), stages=vector_kinds())
    named = gucs.scoped_stages(parsed)
    if len(named) > 1:  # warmup runs one query path: STAGE:GUC=VALUE of one stage only
        raise InputError(
            f"warmup runs one query path but settings are scoped to "
            f"{', '.join(named)}: scope them to one stage",
            field=param("settings"),
        )
    parsed = gucs.scope(parsed, named[0] if named else None)
    with database.connect(autocommit=True) as res:
        target = load(res, target_name)
        if testset:
            vectors, source = wu.testset_vectors(res, testset, embedder)
        else:
            if not target.dimension:
                raise InputError(
                    f"target '{target_name}' has no known dimension: give {param('testset')}",
                    field=param("testset"),
                )
            vectors = wu.random_vectors(target.dimension, random_queries)
            source = f"{random_queries} random vectors (seed 0)"
    with database.connect(results=False, autocommit=True, read_only=True) as kb:
        parsed = {**target.settings, **parsed}  # the target's own (a preset's), then --set
        gucs.validate(kb, parsed)
        return wu.warmup(
            kb,
            target,
            vectors,
            source=source,
            settings=parsed,
            k=k,
            max_passes=max_passes,
            tolerance=tolerance,
            use_prewarm=use_prewarm,
            on_pass=on_pass,
            index=index,
        )
