"""The API's setup methods: schema, test sets, targets (`pgeval init`, `testset`, `target`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.db import Database
    from ..core.install import InitReport
    from ..measure.holes import HolesReport
    from ..providers.embedders.storage import EmbedReport
    from ..targets.add import AddedTarget
    from ..testset.store import LoadReport
    from ..testset.versions import GradeReport

# one id or several (a target's filters)
Ids = str | int | float | Iterable[str | int | float]


class SetupMethods:
    database: Database

    def init(self) -> InitReport:
        """Create or upgrade schema pgeval (`pgeval init`); returns the InitReport."""
        from ..core.install import init

        return init(self.database)

    # ---- test sets -----------------------------------------------------------------------------
    def load_testset(
        self,
        path: str | Path,
        name: str,
        *,
        format: str | None = None,
        queries: str | Path | None = None,
        grade_map: str | dict[int, int] | dict[str, int] | None = None,
        replace: bool = False,
        progress: bool = False,
    ) -> LoadReport:
        """Load a test set file (JSONL, CSV, TREC qrels, BEIR folder) under ``name``; returns the
        LoadReport (`pgeval testset load`; ``progress``: its progress display on stderr)."""
        from ..testset import load

        with self.database.connect(autocommit=True) as conn:
            return load(
                conn,
                str(path),
                name,
                fmt=format,
                queries=None if queries is None else str(queries),
                grade_map=grade_map,
                replace=replace,
                progress=progress,
            )

    def testsets(self) -> list[dict]:
        """The stored test sets with their counts (`pgeval testset list`)."""
        from ..testset import list_testsets

        with self.database.connect(autocommit=True) as conn:
            return list_testsets(conn)

    def testset(self, name: str) -> dict:
        """Test set ``name`` described: counts, grades, query types, grade map, hash
        (`pgeval testset show`)."""
        from ..core.db import snapshot
        from ..testset import show_testset

        with snapshot(self.database) as conn:
            return show_testset(conn, name)

    def delete_testset(self, name: str) -> int:
        """Delete test set ``name`` with its queries, judgements and runs; returns the number of
        runs deleted (`pgeval testset delete`)."""
        from ..testset import delete_testset

        with self.database.connect(autocommit=True) as conn:
            return delete_testset(conn, name)

    def testset_holes(
        self,
        experiment: str,
        out: str | Path,
        *,
        depth: int = 10,
        judge: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> HolesReport:
        """The unjudged chunks of ``experiment``'s top ``depth`` (every stage, every repetition),
        written to the CSV file ``out`` for people to grade (`pgeval testset holes`); ``judge``
        (``openai:MODEL`` at ``base_url``) grades them and the judged ones of the same pool,
        stored apart, its agreement with the people's grades in the report (docs/judging.md);
        ``on_progress(done, total)`` as it grades."""
        from ..measure.holes import holes

        chat = None
        if judge:
            from ..providers.judge import ChatJudge

            chat = ChatJudge(judge, base_url=base_url, api_key_env=api_key_env)
        return holes(self.database, experiment, depth, out, chat, on_progress)

    def grade_testset(
        self,
        path: str | Path,
        *,
        testset: str | None = None,
        name: str | None = None,
        model_grades: str | None = None,
    ) -> GradeReport:
        """A new version of a test set with the grades of a pool file added (`pgeval testset
        grade`); ``model_grades`` (a judge's label) takes that judge's stored grades for the
        rows left ungraded, marked as the judge's."""
        from ..testset.versions import grade

        with self.database.connect(autocommit=True) as conn:
            return grade(conn, path, testset=testset, name=name, model_judge=model_grades)

    # ---- targets -------------------------------------------------------------------------------
    def add_target(
        self,
        name: str,
        *,
        table: str | None = None,
        schema: str | None = None,
        id_column: str | None = None,
        vector_column: str | None = None,
        text_column: str | None = None,
        distance: str | None = None,
        where: Mapping[str, str | list[str]] | None = None,
        null_true: str | Iterable[str] | None = None,
        min_similarity: float | None = None,
        max_distance: float | None = None,
        dimension: int | None = None,
        dimension_column: str | None = None,
        preset: str | None = None,
        knowledge_base_id: Ids | None = None,
        knowledge_id: Ids | None = None,
        tag_id: Ids | None = None,
        group_by: str | None = None,
        replace: bool = False,
        statement: str | None = None,
        statement_file: str | None = None,
    ) -> AddedTarget:
        """Check a knowledge-base table in the catalog and store it as target ``name``
        (`pgeval target add`; every option of the command: ``where`` a mapping of column to
        value (a list of values: IN), ``null_true`` the columns of ``where`` whose NULL counts
        as true, the weknora filters ``knowledge_base_id``, ``knowledge_id``, ``tag_id`` one
        id or a list; ``group_by`` the column the application scopes each search by, which
        sweeps then measure per group; ``statement`` (or the file ``statement_file``) the
        application's SELECT, $1 the query vector and $2 the group's value, which sweeps, watch
        and pipelines then time, its exact twin the ground truth); returns an AddedTarget
        (target, vector indexes, warnings)."""
        from ..targets.add import add_target

        return add_target(
            self.database,
            name,
            table=table,
            schema=schema,
            id_column=id_column,
            vector_column=vector_column,
            text_column=text_column,
            distance=distance,
            where=where,
            null_true=_ids(null_true),
            min_similarity=min_similarity,
            max_distance=max_distance,
            dimension=dimension,
            dimension_column=dimension_column,
            preset=preset,
            knowledge_base_id=_ids(knowledge_base_id),
            knowledge_id=_ids(knowledge_id),
            tag_id=_ids(tag_id),
            replace=replace,
            group_by=group_by,
            statement=statement,
            statement_file=statement_file,
        )

    def targets(self) -> list[dict]:
        """The stored targets (`pgeval target list`)."""
        from ..targets import targets as t

        with self.database.connect(autocommit=True) as conn:
            return t.list_targets(conn)

    def target(self, name: str) -> dict:
        """Target ``name``: ``{"target", "spec", "indexes"}``, its definition and the vector
        indexes the knowledge base has for it (`pgeval target show`)."""
        from ..targets import catalog
        from ..targets import targets as t

        with self.database.connect(autocommit=True) as conn:
            tg = t.load(conn, name)
        with self.database.connect(results=False, autocommit=True, read_only=True) as kb:
            indexes = catalog.vector_indexes(kb, tg)
            log = _change_log(kb, tg)
        return {"target": name, "spec": tg.spec(), "indexes": indexes, "change_log": log}

    def track_changes(self, name: str, *, lock_timeout: str = "5s") -> dict:
        """Add the change log's trigger to target ``name``'s table (`pgeval target track`):
        ``{"table", "trigger", "count", "installed"}``. Needs CREATE on the knowledge base's
        database and ownership of the table; waits at most ``lock_timeout`` for its lock."""
        from ..table import change_log
        from ..targets import targets as t

        with self.database.connect(autocommit=True) as conn:
            tg = t.load(conn, name)
        with self.database.connect(results=False) as kb:
            return change_log.install(kb, tg, lock_timeout=lock_timeout)

    def untrack_changes(self, name: str, *, lock_timeout: str = "5s") -> dict:
        """Drop target ``name``'s change-log trigger and its rows (`pgeval target untrack`)."""
        from ..table import change_log
        from ..targets import targets as t

        with self.database.connect(autocommit=True) as conn:
            tg = t.load(conn, name)
        with self.database.connect(results=False) as kb:
            return change_log.remove(kb, tg, lock_timeout=lock_timeout)

    def remove_target(self, name: str) -> None:
        """Remove target ``name`` (`pgeval target remove`)."""
        from ..targets import targets as t

        with self.database.connect(autocommit=True) as conn:
            t.remove(conn, name)


def _change_log(kb: object, tg: object) -> dict:
    """``{"tracked": bool, "count": statements counted}`` of the target's table."""
    from ..table import change_log
    from ..table.target_table import resolve_table

    state = change_log.state(kb, resolve_table(kb, tg))
    if state is None:
        return {"tracked": False}
    return {"tracked": True, "trigger": change_log.TRIGGER, "count": change_log.count(state)}


def _ids(values: Ids | None) -> list[str | int | float] | None:
    """One id or several -> a list; None stays None."""
    if values is None:
        return None
    if isinstance(values, (str, int, float)):
        return [values]
    return list(values)


class EmbedMethods:
    database: Database

    def embed(
        self,
        testset: str | None,
        embedder: str | None,
        *,
        base_url: str | None = None,
        dimensions: int | None = None,
        api_key_env: str | None = None,
        batch_size: int | None = None,
        recompute: bool = False,
        on_start: Callable[[str], None] | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> EmbedReport:
        """Compute ``testset``'s query embeddings with ``embedder`` (a spec: precomputed,
        openai:MODEL, local:MODEL, numpy:FILE.npy) and store them, once per label
        (`pgeval embed`); ``on_start(label)`` once the embedder is known, ``on_batch(n)`` after
        each batch. Returns the EmbedReport."""
        from ..core.errors import InputError, param
        from ..providers.embedders import parse, storage

        if not testset or not embedder:
            raise InputError(
                f"{param('testset')} and {param('embedder')} are required",
                field=param("testset" if not testset else "embedder"),
            )
        emb = parse(
            embedder,
            base_url=base_url,
            dimensions=dimensions,
            api_key_env=api_key_env,
            batch_size=batch_size,
        )
        if on_start is not None:
            on_start(emb.label)
        with self.database.connect() as conn:
            return storage.ensure(conn, testset, emb, recompute=recompute, on_batch=on_batch)

    def embeddings(self, testset: str | None = None) -> list[dict]:
        """The stored query embeddings (test set, label, dimension, count) (`pgeval embed
        --list`)."""
        from ..providers.embedders import storage

        with self.database.connect(autocommit=True) as conn:
            return storage.list_embeddings(conn, testset)
