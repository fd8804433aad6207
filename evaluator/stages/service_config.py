"""What a ``service`` stage sends and reads: the presets for WeKnora's retrieval API, the generic
form (URL, JSON body template, where the list, the chunk id and the score are in the answer), and
the options that set them (``--opt STAGE:KEY=VALUE``). :mod:`evaluator.stages.service` runs it.

WeKnora (``docs/api/knowledge-base.md`` and ``docs/api/chat.md`` of Tencent/WeKnora), key in the
``X-API-Key`` header:

- ``weknora-vector`` / ``weknora-keyword`` / ``weknora-hybrid``:
  ``POST {url}/api/v1/knowledge-bases/{knowledge_base_id}/hybrid-search`` with ``query_text``,
  ``match_count`` and ``disable_keywords_match`` / ``disable_vector_match`` choosing the path
  (optional ``vector_threshold``, ``keyword_threshold``, ``knowledge_base_ids``,
  ``knowledge_ids``, ``tag_ids``); answer ``data[]`` with ``id`` (chunk id) and ``score``;
- ``weknora-final``: ``POST {url}/api/v1/knowledge-search`` with ``query`` and
  ``knowledge_base_id`` (or ``knowledge_base_ids``): the list after WeKnora's rerank, thresholds
  and pinning rules; answer ``data[]`` with ``id``, ``score``, ``seq``.

Body templates are JSON; a string that is exactly ``"{{query}}"``, ``"{{query_id}}"``,
``"{{vector}}"`` (the query embedding, a list of numbers), ``"{{match_count}}"`` (a number) or
``"{{knowledge_base_id}}"`` becomes that value; inside a longer string the placeholder is replaced
by its text. The template is parsed first, so a query text can never break the JSON.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from ..core import masking
from ..core.errors import InputError, param
from ..providers.http_json import check_url

if TYPE_CHECKING:
    from .base import StageContext

KEY_ENV = "PGEVAL_SERVICE_KEY"  # default variable holding the API key
URL_ENV = "PGEVAL_SERVICE_URL"  # default base URL when --opt STAGE:url is not given
ROLES = ("ann", "keyword", "path", "merge", "rerank")
PLACEHOLDER = re.compile(r"\{\{\s*(query|query_id|vector|match_count|knowledge_base_id)\s*\}\}")

HYBRID = "/api/v1/knowledge-bases/{kb}/hybrid-search"


def _hybrid(role: str, node: str, *, keywords: bool, vectors: bool) -> dict[str, Any]:
    """A preset of WeKnora's hybrid search answering by ``node``: its keyword match, its vector
    match, or both."""
    body = {"query_text": "{{query}}", "match_count": "{{match_count}}"}
    flags = {"disable_keywords_match": not keywords, "disable_vector_match": not vectors}
    return {"path": HYBRID, "role": role, "node": node, "body": {**body, **flags}}


PRESETS: dict[str, dict[str, Any]] = {
    "weknora-vector": _hybrid("ann", "vector", keywords=False, vectors=True),
    "weknora-keyword": _hybrid("keyword", "keyword", keywords=True, vectors=False),
    "weknora-hybrid": _hybrid("merge", "hybrid", keywords=True, vectors=True),
    "weknora-final": {
        "path": "/api/v1/knowledge-search",
        "role": "rerank",
        "node": "final",
        "body": {"query": "{{query}}"},
    },
}
# options of the hybrid-search body (WeKnora's SearchParams) a user may set
FLOAT_FIELDS = ("vector_threshold", "keyword_threshold")
LIST_FIELDS = ("knowledge_base_ids", "knowledge_ids", "tag_ids")
BOOL_FIELDS = ("only_recommended", "skip_context_enrichment")
SECRET_OPTIONS = ("key", "api_key", "apikey", "token", "password", "x-api-key", "authorization")

OPTIONS = {
    "url",
    "key_env",
    "key_header",
    "knowledge_base_id",
    "match_count",
    "timeout",
    "retries",
    "backoff",
    "max_backoff",
    "concurrency",
    "rate",
    "max_consecutive_failures",
    "body",
    "list",
    "id",
    "score",
    "role",
    "input",
    "inputs",
    "embedder",
    *FLOAT_FIELDS,
    *LIST_FIELDS,
    *BOOL_FIELDS,
}


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


_bool.__name__ = "boolean (true/false)"


def _positive(cast: Any, minimum: Any) -> Any:
    def check(value: Any) -> Any:
        v = cast(value)
        if v < minimum:
            raise ValueError(value)
        return v

    check.__name__ = f"{cast.__name__} >= {minimum}"
    return check


def check_option_names(stage: str, keys: Any) -> None:
    """No key in the options (it would be stored), no unknown option."""
    for key in keys:
        if key.lower() in SECRET_OPTIONS:
            raise InputError(
                f"option {stage}:{key} would write the API key into the experiment's "
                f"configuration: put it in an environment variable and name it with "
                f"{param('options')} {stage}:key_env=VAR (default {KEY_ENV})",
                field=param("options"),
            )
        if key not in OPTIONS:
            raise InputError(
                f"unknown option {stage}:{key} (known: {', '.join(sorted(OPTIONS))})",
                field=param("options"),
            )


def _base_url(ctx: StageContext) -> str:
    """The service's URL (``url`` or the environment's), checked, without a secret in it."""
    stage = ctx.stage
    base = ctx.option("url") or os.environ.get(URL_ENV)
    if not base:
        raise InputError(
            f"stage {stage} needs the service's URL: {param('options')} {stage}:url=http://HOST:PORT"
            f" (or {URL_ENV})",
            field=param("options"),
        )
    base = base.strip()
    check_url(base, f"{stage}:url", param("options"))
    if masking.mask(base, known=False) != base:
        raise InputError(
            f"{stage}:url '{masking.mask(base)}' carries a key or token: put it in "
            f"an environment variable ({param('options')} {stage}:key_env=VAR)",
            field=param("options"),
        )
    return base


def _common(ctx: StageContext, preset: str | None) -> dict:
    """The options every service stage has, with their defaults."""
    return {
        "preset": preset,
        "match_count": ctx.option("match_count", ctx.depth, _positive(int, 1)),
        "timeout": ctx.option("timeout", 30.0, _positive(float, 0.001)),
        "retries": ctx.option("retries", 3, _positive(int, 0)),
        "backoff": ctx.option("backoff", 0.5, _positive(float, 0.0)),
        "max_backoff": ctx.option("max_backoff", 30.0, _positive(float, 0.0)),
        "concurrency": ctx.option("concurrency", 1, _positive(int, 1)),
        "rate": ctx.option("rate", None, _positive(float, 0.001)),
        "max_consecutive_failures": ctx.option("max_consecutive_failures", 10, _positive(int, 0)),
        "key_env": ctx.option("key_env") or KEY_ENV,
        "list": ctx.option("list") or "data",
        "id": ctx.option("id") or "id",
        "score": ctx.option("score", "score"),
    }


def _preset_url(spec: dict, base: str, kb: str | None, stage: str) -> str:
    root = re.sub(r"/+$", "", base)
    root = re.sub(r"/api/v1$", "", root)
    if spec["path"] != HYBRID:
        return root + spec["path"]
    if not kb:
        raise InputError(
            f"stage {stage} needs --opt {stage}:knowledge_base_id=ID (the knowledge base searched)",
            field=param("options"),
        )
    return root + HYBRID.replace("{kb}", _path_part(kb, stage))


def _preset_body(ctx: StageContext, preset: str, spec: dict, kb: str | None) -> Any:
    """The preset's body with the options that fill it (a ``body`` template replaces it)."""
    stage = ctx.stage
    body = json.loads(json.dumps(spec["body"]))
    if preset == "weknora-final":
        ids = ctx.option("knowledge_base_ids")
        if ids:
            body["knowledge_base_ids"] = comma_list(ids)
        elif kb:
            body["knowledge_base_id"] = "{{knowledge_base_id}}"
        else:
            raise InputError(
                f"stage {stage} needs {param('options')} {stage}:knowledge_base_id=ID (or "
                "knowledge_base_ids=ID1,ID2)",
                field=param("options"),
            )
        for f in ("knowledge_ids",):
            if ctx.option(f):
                body[f] = comma_list(ctx.option(f))
    else:
        for f in FLOAT_FIELDS:
            if ctx.option(f) is not None:
                body[f] = ctx.option(f, None, float)
        for f in LIST_FIELDS:
            if ctx.option(f):
                body[f] = comma_list(ctx.option(f))
        for f in BOOL_FIELDS:
            if ctx.option(f) is not None:
                body[f] = ctx.option(f, None, _bool)
    if ctx.option("body"):
        body = _template(ctx.option("body"), stage)
    return body


def _endpoint(ctx: StageContext, preset: str | None, base: str, kb: str | None) -> dict:
    """url, body, role, node and key_header: a preset's, or a generic service's template."""
    stage = ctx.stage
    if preset is not None:
        spec = PRESETS[preset]
        return dict(
            url=_preset_url(spec, base, kb, stage),
            body=_preset_body(ctx, preset, spec, kb),
            role=spec["role"],
            node=spec["node"],
            key_header=ctx.option("key_header") or "X-API-Key",
        )
    if not ctx.option("body"):
        raise InputError(
            f"stage {stage} needs a JSON body template: {param('options')} {stage}:body="
            '\'{"query": "{{query}}", "top_k": "{{match_count}}"}\'',
            field=param("options"),
        )
    return dict(
        url=base,
        body=_template(ctx.option("body"), stage),
        role="path",
        node=None,
        key_header=ctx.option("key_header") or "Authorization",
    )


def _check_names(cfg: dict, stage: str) -> None:
    """The header and variable names, and the result paths, are names (never a key)."""
    if not re.fullmatch(r"[A-Za-z0-9-]+", cfg["key_header"]):
        raise InputError(f"option {stage}:key_header must be a header name", field=param("options"))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cfg["key_env"]):
        raise InputError(
            f"option {stage}:key_env must be an environment variable's name, not the key itself",
            field=param("options"),
        )
    for key in ("list", "id"):
        if not cfg[key].strip():
            raise InputError(
                f"option {stage}:{key} must be a dotted path, e.g. data or result.items",
                field=param("options"),
            )


def resolve(ctx: StageContext, preset: str | None) -> dict:
    """The stage's whole configuration from its options (InputError naming ``--opt`` when one
    is wrong). No secret is in it: the key is read later, from the variable ``key_env`` names."""
    stage = ctx.stage
    check_option_names(ctx.stage, ctx.options)
    base = _base_url(ctx)
    cfg = _common(ctx, preset)
    kb = ctx.option("knowledge_base_id")
    cfg.update(_endpoint(ctx, preset, base, kb))
    role = ctx.option("role")
    if role is not None:
        if role not in ROLES:
            raise InputError(
                f"option {stage}:role must be one of {', '.join(ROLES)}", field=param("options")
            )
        cfg["role"] = role
    _check_names(cfg, stage)
    cfg["knowledge_base_id"] = kb
    cfg["uses_vector"] = bool(re.search(r"\{\{\s*vector\s*\}\}", json.dumps(cfg["body"])))
    return cfg


def _path_part(value: str, stage: str) -> str:
    from urllib.parse import quote

    if not value.strip():
        raise InputError(f"option {stage}:knowledge_base_id is empty", field=param("options"))
    return quote(value.strip(), safe="")


def comma_list(value: str) -> list[str]:
    """``"a, b,"`` as ``["a", "b"]``."""
    return [v.strip() for v in value.split(",") if v.strip()]


def _template(text: str, stage: str) -> Any:
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"option {stage}:body is not JSON ({exc})", field=param("options")
        ) from None
    if not isinstance(body, dict):
        raise InputError(f"option {stage}:body must be a JSON object", field=param("options"))
    if not re.search(r"\{\{\s*(query|vector)\s*\}\}", json.dumps(body)):
        raise InputError(
            f'option {stage}:body does not use the query: put "{{{{query}}}}" '
            '(or "{{vector}}") where the service expects it',
            field=param("options"),
        )
    return body


def render(template: Any, values: dict) -> Any:
    """``template`` with its placeholders filled from ``values`` (see the module docstring)."""
    if isinstance(template, dict):
        return {k: render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template.strip())
        if whole:
            return values.get(whole.group(1))
        return PLACEHOLDER.sub(
            lambda m: "" if values.get(m.group(1)) is None else str(values.get(m.group(1))),
            template,
        )
    return template


class AnswerError(Exception):
    """An answer (HTTP 2xx, JSON) without the ranked list where the configuration says it is."""


def _walk(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif (
            isinstance(cur, list)
            and part.lstrip("-").isdigit()
            and -len(cur) <= int(part) < len(cur)
        ):
            cur = cur[int(part)]
        else:
            raise KeyError(part)
    return cur


def ranked(doc: Any, cfg: dict) -> tuple[list[tuple[str, float | None]], int, int]:
    """(the list as the service ranked it: [(chunk id, score)], items answered, duplicates
    dropped). AnswerError naming what is missing."""
    if isinstance(doc, dict) and doc.get("success") is False:
        err = doc.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        raise AnswerError(
            f"the service answered success=false: "
            f"{' '.join(str(msg or doc.get('message') or '').split())[:200]}"
        )
    try:
        items = _walk(doc, cfg["list"])
    except KeyError:
        keys = ", ".join(map(str, list(doc)[:8])) if isinstance(doc, dict) else type(doc).__name__
        raise AnswerError(f"the answer has no '{cfg['list']}' (it has: {keys})") from None
    if items is None:
        items = []
    if not isinstance(items, list):
        raise AnswerError(f"'{cfg['list']}' in the answer is {type(items).__name__}, not a list")
    out: list[tuple[str, float | None]] = []
    seen: set[str] = set()
    dup = 0
    for i, item in enumerate(items, 1):
        try:
            cid = _walk(item, cfg["id"])
        except KeyError:
            raise AnswerError(f"item {i} of '{cfg['list']}' has no '{cfg['id']}'") from None
        if cid is None or isinstance(cid, (dict, list, bool)) or str(cid) == "":
            raise AnswerError(
                f"item {i} of '{cfg['list']}' has no usable '{cfg['id']}': {json.dumps(cid)[:60]}"
            )
        score = None
        if cfg.get("score"):
            try:
                raw = _walk(item, cfg["score"])
            except KeyError:
                raw = None
            if raw is not None:
                if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                    raise AnswerError(
                        f"item {i} of '{cfg['list']}' has a '{cfg['score']}' that "
                        f"is not a number: {json.dumps(raw)[:60]}"
                    )
                score = float(raw)
        cid = str(cid)
        if cid in seen:
            dup += 1
            continue
        seen.add(cid)
        out.append((cid, score))
    return out, len(items), dup


def shown(cfg: dict) -> dict:
    """The configuration as run.params and the fingerprint keep it (no key: only its variable's
    name; the URL masked all the same)."""
    keep = (
        "preset",
        "node",
        "role",
        "url",
        "body",
        "list",
        "id",
        "score",
        "match_count",
        "key_env",
        "key_header",
        "timeout",
        "retries",
        "concurrency",
        "rate",
        "knowledge_base_id",
    )
    out = {k: cfg.get(k) for k in keep}
    out["url"] = masking.mask(cfg["url"])
    return masking.mask_value(out)
