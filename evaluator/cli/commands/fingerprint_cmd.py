"""`pgeval fingerprint`: the configuration fingerprint of a target (or of a stored run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ...api import vocabulary
from ..flags import EMBEDDER, NO_CHECKSUM, RUN, SET, STAGE, TARGET, TESTSET, format_option
from ..output import emit, printed_json, warn
from .common import pass_api
from .health_cmd import show_findings

if TYPE_CHECKING:
    from ...api import Pgeval


@click.command()
@TARGET.but(
    help="Target whose configuration to capture (see `pgeval target list`).", required=False
)
@RUN.but(
    "run_name",
    help="Print the fingerprint stored with a run (or an experiment) instead of capturing one.",
    required=False,
)
@TESTSET.but(help="Include this test set's content hash.")
@EMBEDDER.but(help="Embedding model label to record.")
@STAGE.but(metavar="KIND", help="Stage the settings are for (recorded).", required=False, type=None)
@click.option("--chunking", metavar="LABEL", help="Chunking label to record (e.g. 512tok-64).")
@SET.but(
    metavar="GUC=VALUE",
    help="A query-time setting as the stage would apply it (SET LOCAL), repeatable.",
)
@NO_CHECKSUM
@click.option("--check", is_flag=True, help="Also run the health check (see `pgeval health`).")
@format_option(choices=("table", "json"))
@pass_api
def fingerprint(
    pg: Pgeval,
    target_name: str | None,
    run_name: str | None,
    no_checksum: bool,
    fmt: str,
    **options: Any,
) -> None:
    """Print the configuration fingerprint and its config hash.

    \b
    The fingerprint holds what can change a retrieval number, and only that: the server (version;
    system identifier, in recovery or not, the DSN's host and port: a standby or another host is
    another configuration) and the versions of the extensions retrieval uses (vector,
    vectorscale, pg_textsearch — not every installed extension), the target table's indexes,
    their options (m, ef_construction, lists, num_neighbors, storage_layout, ...), their build
    (OID and file node: REINDEX makes a new build, and a new hash) and state (pages, and the
    table's dead tuples: a VACUUM that removes them changes the hash), the hnsw.* / ivfflat.* / diskann.* settings, planner settings
    (work_mem, parallel workers, jit, enable_* off; not timeouts), row count and content
    checksum of the target, embedding model and dimension, filters, the test set's content hash
    and what a run measures (stages, options, depth, ...). The config hash is the sha256 of its
    canonical JSON; the info part (capture time, sizes, names, the full configuration) is shown
    but not hashed.

    \b
    Examples:
      pgeval fingerprint --target kb
      pgeval fingerprint --target kb --testset kb-v1 --set hnsw.ef_search=100 --format json
      pgeval fingerprint --target kb --no-checksum --check
      pgeval fingerprint --run exp1.hnsw.1
    """
    # the other options go to the API under their names
    report = pg.fingerprint(target_name, run=run_name, checksum=not no_checksum, **options)
    findings = report.health
    if not printed_json(fmt, report.as_dict()):
        click.echo(
            f"config hash {report.config_hash} (short {vocabulary.short_hash(report.config_hash)})"
        )
        emit(report.rows(), "table", ["key", "value"])
        if findings is not None:
            show_findings(findings, "table")
    if findings and fmt != "table":
        warn(*(f"{f.check}: {f.detail}" for f in findings if f.status != "ok"))
