"""`pgeval fingerprint`'s use case: the fingerprint of a target captured now, or the one stored
with a run or experiment, with the health check of its target when asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.db import Database
from ..core.errors import InputError, param


@dataclass
class FingerprintReport:
    config_hash: str | None
    fingerprint: dict
    health: list | None = None  # health findings (check=True), else None

    def rows(self) -> list[dict]:
        """One row per dotted key of the fingerprint, its value shown."""
        from .config_diff import flatten, show_value

        return [{"key": k, "value": show_value(v)} for k, v in flatten(self.fingerprint).items()]

    def as_dict(self) -> dict:
        """What `pgeval fingerprint --format json` prints."""
        out: dict = {"config_hash": self.config_hash, "fingerprint": self.fingerprint}
        if self.health is not None:
            out["health"] = [f.as_dict() for f in self.health]
        return out


def fingerprint_of(
    database: Database,
    *,
    target: str | None = None,
    run: str | None = None,
    testset: str | None = None,
    embedder: str | None = None,
    settings: Any = (),
    stage: str | None = None,
    checksum: bool = True,
    chunking: str | None = None,
    check: bool = False,
) -> FingerprintReport:
    """Target ``target``'s fingerprint now, or run (or experiment) ``run``'s stored one: exactly
    one of the two. ``check``: also the health findings of the target."""
    if bool(target) == bool(run):
        raise InputError(
            f"give either {param('target')} NAME (capture now) or {param('run')} RUN (stored)",
            field=param("target"),
        )
    if run:
        from .config_diff import load_fingerprint

        with database.connect(autocommit=True) as conn:
            fp, h, kind = load_fingerprint(conn, run)
        if fp is None:
            raise InputError(f"{kind} '{run}' has no stored fingerprint", field=param("run"))
    else:
        from ..stages import gucs
        from ..stages.gucs import settings_items
        from .fingerprint import capture_for

        fp, h = capture_for(
            database,
            str(target),
            testset=testset,
            embedder=embedder,
            settings=gucs.parse(settings_items(settings)),
            stage=stage,
            checksum=checksum,
            chunking=chunking,
        )
    findings = None
    if check:
        from .health_target import check_target

        # a stored fingerprint without a target passes None: load() answers "no target named"
        findings = check_target(
            database,
            target
            or (fp.get("info") or {}).get("target")  # type: ignore[arg-type]
            or (fp.get("target") or {}).get("name"),
            testset=testset,
            embedder=embedder,
        )
    return FingerprintReport(h, fp, findings)
