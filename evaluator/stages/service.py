"""``service``: a live retrieval API called once per query (WeKnora's nodes through the presets
``weknora-vector``, ``weknora-keyword``, ``weknora-hybrid``, ``weknora-final``; any JSON API
through the generic form). The list is stored exactly as the service ranked it (rank = position
in the answer; a chunk answered twice keeps its first place) — ids the test set does not know
included — with the service's scores ("score": "similarity"); latency is the request's round
trip. Configuration: :mod:`evaluator.stages.service_config`.

A good client: the key comes from an environment variable (``key_env``, default
``PGEVAL_SERVICE_KEY``), is registered with :mod:`evaluator.core.masking` and is never stored,
printed or reported; ``timeout`` per request; ``retries`` with exponential backoff (``backoff``,
honouring ``Retry-After``) on 429, 5xx, timeouts and connection errors; ``concurrency`` requests
in flight; ``rate`` requests per second at most. A query that gets no usable answer is recorded
in ``pgeval.query_failure`` (status, message, attempts) with its progress row and counted in the
stage report — never silently an empty list. ``max_consecutive_failures`` (default 10, 0: never)
in a row stop the stage: the service looks down, and those queries stay unanswered so that
`pgeval run resume` asks them again.

Roles in the loss chain (``pgeval.stage_role`` reads ``params.role``): vector ``ann``, keyword
``keyword``; hybrid ``merge`` of the earlier WeKnora vector and keyword stages of the experiment
(``path`` when there are none); final ``rerank`` of the latest earlier WeKnora stage (``path``
when there is none); the generic form ``path`` unless ``--opt STAGE:role=...``.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core import masking
from ..core.errors import InputError, param
from ..providers.http_json import HttpFailure, JsonClient
from ..testset.query import Query
from . import service_config as sc
from . import store
from .base import SCORE_SIMILARITY, BaseStage, StageContext

ORDER_SERVICE = (
    "as the service ranked them (rank = position in its answer; a repeated chunk keeps "
    "its first place)"
)
FLUSH_EVERY = 5  # a killed run loses at most a few answered queries
# refusals that no query would escape (wrong key, no such knowledge base or endpoint): the stage
# stops at the first one instead of recording every query as failed
FATAL = (401, 403, 404, 405)


def boundary(cfg: dict) -> str:
    return (
        f"HTTP round trip per query: request sent to the last byte of the answer read "
        f"(the answered attempt; retries and backoff waits not included), "
        f"{cfg['concurrency']} request(s) in flight"
    )


class ServiceDown(InputError):
    """Too many queries failed in a row: the stage stops (resume asks the rest)."""


class RateLimit:
    """At most ``rate`` request starts per second across threads (None: no limit)."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.next = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
        if start > now:
            time.sleep(start - now)


class ServiceStage(BaseStage):
    kind = "service"
    preset: str | None = None
    score = SCORE_SIMILARITY
    options = frozenset(sc.OPTIONS)

    @classmethod
    def refuse_options(cls, stage: str, keys: Any) -> None:
        sc.check_option_names(stage, keys)  # a key's own message first

    # ---- configuration --------------------------------------------------------------------
    def config(self, ctx: StageContext) -> dict:
        return sc.resolve(ctx, self.preset)

    def key(self, ctx: StageContext, cfg: dict) -> str | None:
        var = cfg["key_env"]
        key = os.environ.get(var)
        if key:
            masking.remember_secret(key)
            return key
        if var != sc.KEY_ENV or self.preset is not None:
            raise InputError(
                f"stage {ctx.stage} needs the service's API key in the environment "
                f"variable {var}, which is not set ({param('options')} {ctx.stage}:key_env=VAR "
                "names another)",
                field=param("options"),
            )
        return None

    def client(self, ctx: StageContext, cfg: dict) -> JsonClient:
        return JsonClient(
            cfg["url"],
            key=self.key(ctx, cfg),
            timeout=cfg["timeout"],
            retries=cfg["retries"],
            backoff_s=cfg["backoff"],
            key_header=cfg["key_header"],
            max_backoff_s=cfg["max_backoff"],
            field=param("options"),
        )

    def prepare(self, ctx: StageContext) -> None:
        cfg = self.config(ctx)
        self.client(ctx, cfg)  # the key is there (and masked from now on)
        ctx.extra["service"] = sc.shown(cfg)
        if cfg["uses_vector"]:
            ctx.extra["vectors"] = self._vectors(ctx)

    def _vectors(self, ctx: StageContext) -> dict[str, list[float]]:
        """Query embeddings for a body template that sends ``{{vector}}``: those the pipeline
        loaded, else the test set's under ``--opt STAGE:embedder`` (default precomputed)."""
        have = {q.query_id: q.embedding for q in ctx.queries if q.embedding is not None}
        if len(have) == len(ctx.queries) and not ctx.option("embedder"):
            return {k: [float(x) for x in v] for k, v in have.items()}
        from ..providers.embedders import parse, storage

        emb = parse(ctx.option("embedder") or ctx.embedder or "precomputed")
        storage.ensure(ctx.results, ctx.testset, emb)
        loaded = storage.load(ctx.results, ctx.testset_id, emb.label)
        ctx.results.commit()
        return {
            q.query_id: [float(x) for x in q.embedding] for q in loaded if q.embedding is not None
        }

    def roles(self, ctx: StageContext, cfg: dict) -> dict:
        """role, and the inputs the loss chain follows (``input`` / ``inputs``)."""
        out: dict = {"role": cfg["role"]}
        explicit_input, explicit_inputs = ctx.option("input"), ctx.option("inputs")
        if explicit_input:
            out["input"] = explicit_input
        if explicit_inputs:
            out["inputs"] = sc.comma_list(explicit_inputs)
        if self.preset not in ("weknora-hybrid", "weknora-final") or ctx.option("role"):
            return out
        earlier = {}
        if ctx.previous:
            rows = ctx.results.execute(
                "SELECT run_id, params->>'node' FROM pgeval.run WHERE run_id = ANY(%s) AND "
                "params->>'kind' = 'service' AND params->>'preset' LIKE 'weknora-%%'",
                (list(ctx.previous.values()),),
            ).fetchall()
            ctx.results.rollback()
            node: dict[int, Any] = dict(rows)
            earlier = {name: node[rid] for name, rid in ctx.previous.items() if rid in node}
        if self.preset == "weknora-hybrid":
            paths = [n for n, node in earlier.items() if node in ("vector", "keyword")]
            if explicit_inputs:
                return out
            if paths:
                out["inputs"] = paths
            else:
                out["role"] = "path"
        else:
            if explicit_input:
                return out
            if earlier:
                hybrid = [n for n, node in earlier.items() if node == "hybrid"]
                out["input"] = (hybrid or list(earlier))[-1]
            else:
                out["role"] = "path"
        return out

    # ---- one query ------------------------------------------------------------------------
    def _ask(self, client: JsonClient, cfg: dict, limit: RateLimit, values: dict) -> tuple:
        """("ok", ranked, ms, answered, duplicates, attempts) or ("fail", status, message,
        attempts)."""
        limit.wait()
        try:
            doc, ms, attempts = client.post_timed(sc.render(cfg["body"], values))
        except HttpFailure as exc:
            if exc.status in FATAL:
                return ("fatal", exc.status, exc.detail, exc.attempts)
            return ("fail", exc.status, exc.detail, exc.attempts)
        try:
            ranked, answered, dup = sc.ranked(doc, cfg)
        except sc.AnswerError as exc:
            return ("fail", 200, f"{client.shown_url}: {exc}", attempts)
        return ("ok", ranked, ms, answered, dup, attempts)

    def run(self, ctx: StageContext, run_name: str) -> int:
        cfg = self.config(ctx)
        client = self.client(ctx, cfg)
        params = {
            "kind": self.kind,
            "preset": self.preset,
            "node": cfg["node"],
            "score": SCORE_SIMILARITY,
            "service": sc.shown(cfg),
            **self.roles(ctx, cfg),
        }
        vectors = ctx.extra.get("vectors") or {}
        limit = RateLimit(cfg["rate"])
        stats = {"failed": 0, "retried": 0, "duplicates": 0, "answered_rows": 0}
        max_streak = cfg["max_consecutive_failures"]

        def values(q: Query) -> dict:
            return {
                "query": q.text or "",
                "query_id": q.query_id,
                "vector": vectors.get(q.query_id),
                "match_count": cfg["match_count"],
                "knowledge_base_id": cfg["knowledge_base_id"],
            }

        _check_sendable(ctx, cfg, vectors)
        with store.run_scope(
            ctx,
            run_name,
            params=params,
            order_rule=ORDER_SERVICE,
            timing_boundary=boundary(cfg),
            flush_every=FLUSH_EVERY,
        ) as out:
            if ctx.progress:
                ctx.progress.start(ctx.stage, len(ctx.queries))
            streak: list[tuple] = []  # failures in a row, held until an answer comes
            pool = ThreadPoolExecutor(
                max_workers=cfg["concurrency"], thread_name_prefix=f"pgeval-{ctx.stage}"
            )
            try:
                answers = pool.map(lambda q: self._ask(client, cfg, limit, values(q)), ctx.queries)
                for q, a in zip(ctx.queries, answers):
                    if a[0] == "fatal":
                        hint = (
                            f" (is the key in {cfg['key_env']} right?)"
                            if a[1] in (401, 403)
                            else " (check the URL and knowledge_base_id)"
                        )
                        raise InputError(
                            f"stage {ctx.stage}: {masking.mask(a[2])}{hint}", field=param("options")
                        )
                    if a[0] == "fail":
                        streak.append((q.query_id, a[1], a[2], a[3]))
                        if max_streak and len(streak) >= max_streak:
                            raise ServiceDown(
                                f"stage {ctx.stage}: {len(streak)} queries in a row got no answer"
                                f" (last, query '{q.query_id}': {masking.mask(a[2])}): the "
                                f"service looks down; the {out.queries} queries written so far "
                                "are kept and `pgeval run resume` asks the others",
                                field=param("options"),
                            )
                    else:
                        for f in streak:
                            out.fail(*f)
                        streak = []
                        _, ranked, ms, answered, dup, attempts = a
                        stats["retried"] += attempts > 1
                        stats["duplicates"] += dup
                        stats["answered_rows"] += answered
                        out.add(q.query_id, ranked, latency_ms=ms, rows_returned=answered)
                    if ctx.progress:
                        ctx.progress.advance()
                for f in streak:
                    out.fail(*f)
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
            stats["failed"] = out.failures
            stats["requests"] = client.requests
            out.params.update(stats)
        _warn_unanswered(ctx, out.failures, stats["duplicates"])
        return out.run_id


def _preset(name: str) -> type:
    return type(f"Service_{name.replace('-', '_')}", (ServiceStage,), {"preset": name})


WeknoraVectorStage = _preset("weknora-vector")
WeknoraKeywordStage = _preset("weknora-keyword")
WeknoraHybridStage = _preset("weknora-hybrid")
WeknoraFinalStage = _preset("weknora-final")


def _check_sendable(ctx: StageContext, cfg: dict, vectors: dict) -> None:
    """Every query has what the body sends: its text, or its embedding for ``{{vector}}``."""
    missing_text = [q.query_id for q in ctx.queries if not (q.text and q.text.strip())]
    if missing_text and not cfg["uses_vector"]:
        raise InputError(
            f"stage {ctx.stage}: query '{missing_text[0]}' has no text to send "
            f"({len(missing_text)} such queries)",
            field=param("stages"),
        )
    if cfg["uses_vector"]:
        lacking = [q.query_id for q in ctx.queries if q.query_id not in vectors]
        if lacking:
            raise InputError(
                f"stage {ctx.stage}: query '{lacking[0]}' has no embedding to "
                f"send as {{{{vector}}}}",
                field=param("options"),
            )


def _warn_unanswered(ctx: StageContext, failures: int, duplicates: int) -> None:
    if failures:
        ctx.warn(
            f"stage {ctx.stage}: {failures} of {len(ctx.queries)} queries got no "
            "answer from the service (recorded per query; they count as empty lists; "
            "see `pgeval stage-report`)"
        )
    if duplicates:
        ctx.warn(
            f"stage {ctx.stage}: the service answered {duplicates} chunk ids "
            "twice in one list (each kept at its first place)"
        )
