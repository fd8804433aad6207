"""`pgeval fingerprint`: the configuration fingerprint of a target (or of a stored run)."""

from __future__ import annotations

import click

from ..output import emit, format_option, to_json, warn
from .common import no_checksum_option, pass_db


def fingerprint_rows(fp: dict) -> list[dict]:
    from ...dba.config_diff import flatten, show_value

    return [{"key": k, "value": show_value(v)} for k, v in flatten(fp).items()]


@click.command()
@click.option(
    "--target",
    "target_name",
    metavar="NAME",
    help="Target whose configuration to capture (see `pgeval target list`).",
)
@click.option(
    "--run",
    "run_name",
    metavar="RUN",
    help="Print the fingerprint stored with a run (or an experiment) instead of capturing one.",
)
@click.option("--testset", metavar="NAME", help="Include this test set's content hash.")
@click.option("--embedder", metavar="SPEC", help="Embedding model label to record.")
@click.option("--stage", metavar="KIND", help="Stage the settings are for (recorded).")
@click.option("--chunking", metavar="LABEL", help="Chunking label to record (e.g. 512tok-64).")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="GUC=VALUE",
    help="A query-time setting as the stage would apply it (SET LOCAL), repeatable.",
)
@no_checksum_option()
@click.option("--check", is_flag=True, help="Also run the health check (see `pgeval health`).")
@format_option(choices=("table", "json"))
@pass_db
def fingerprint(
    database,
    target_name,
    run_name,
    testset,
    embedder,
    stage,
    chunking,
    settings,
    no_checksum,
    check,
    fmt,
):
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
    from ...core.errors import InputError
    from ...dba.fingerprint import short_hash
    from ...stages import gucs

    if bool(target_name) == bool(run_name):
        raise InputError(
            "give either --target NAME (capture now) or --run RUN (stored)", field="--target"
        )
    if run_name:
        from ...dba.config_diff import load_fingerprint

        with database.connect(autocommit=True) as conn:
            fp, h, kind = load_fingerprint(conn, run_name)
        if fp is None:
            raise InputError(f"{kind} '{run_name}' has no stored fingerprint", field="--run")
    else:
        from ...dba.fingerprint import capture_for

        fp, h = capture_for(
            database,
            target_name,
            testset=testset,
            embedder=embedder,
            settings=gucs.parse(settings),
            stage=stage,
            checksum=not no_checksum,
            chunking=chunking,
        )
    findings = None
    if check:
        from .health_cmd import run_check

        # a stored fingerprint without a target passes None: load() answers "no target named"
        findings = run_check(
            database,
            target_name
            or (fp.get("info") or {}).get("target")  # type: ignore[arg-type]
            or (fp.get("target") or {}).get("name"),
            testset=testset,
            embedder=embedder,
        )
    if fmt == "json":
        out = {"config_hash": h, "fingerprint": fp}
        if findings is not None:
            out["health"] = [f.as_dict() for f in findings]
        click.echo(to_json(out))
    else:
        click.echo(f"config hash {h} (short {short_hash(h)})")
        emit(fingerprint_rows(fp), "table", ["key", "value"])
        if findings is not None:
            from .health_cmd import show_findings

            show_findings(findings, "table")
    if findings and fmt != "table":
        for f in findings:
            if f.status != "ok":
                warn(f"{f.check}: {f.detail}")
