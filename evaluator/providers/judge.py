"""A model judge: an OpenAI-compatible chat endpoint asked to grade a (query, passage) pair 0-3.

Spec (``--judge``): ``openai:MODEL``: ``POST {base_url}/chat/completions`` with
``{"model", "messages": [system, user], "temperature": 0}``, answered by
``{"choices": [{"message": {"content": "2"}}]}`` (OpenAI, DashScope's compatible mode, vLLM,
Ollama, LiteLLM). ``base_url`` defaults to ``$OPENAI_BASE_URL``, else api.openai.com/v1; the
API key comes from the environment variable ``api_key_env`` (default ``OPENAI_API_KEY``; ''
sends none) and never appears in a message. Retries and backoff: :mod:`.http_json`;
:data:`CONCURRENCY` requests at a time.

The prompt is :data:`SYSTEM` and :data:`USER`, printed in docs/judging.md (a test keeps them
equal). The answer must start with the grade's digit; anything else is an error naming the
query and chunk, never a guess.
"""

from __future__ import annotations

import re

from ..core.errors import InputError, param
from ..core.masking import mask
from .http_json import JsonClient, key_from_env, openai_base_url

CONCURRENCY = 4  # requests in flight at once
FIELD = param("judge")

SYSTEM = """You are a relevance assessor building the judgements of a search test collection.
Given a query and a passage, grade how well the passage answers the query:
3 = the passage answers the query directly;
2 = the passage holds the core of the answer, but not all of it or not plainly;
1 = the passage is on the query's topic but does not answer it;
0 = the passage is not relevant to the query.
Judge the passage alone, not what it might link to. Answer with the grade's single digit and
nothing else."""

USER = """Query: {query}

Passage: {passage}

Grade (0, 1, 2 or 3):"""

_GRADE = re.compile(r"\s*([0-3])(?!\d)")


class ChatJudge:
    """Grades 0-3 from an OpenAI-compatible chat endpoint (see the module docstring)."""

    def __init__(
        self,
        spec: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float | None = None,
        retries: int = 4,
        backoff_s: float = 0.5,
    ):
        kind, sep, model = (spec or "").strip().partition(":")
        if kind != "openai" or not sep or not model:
            raise InputError(f"unknown judge '{mask(spec)}' (openai:MODEL)", field=FIELD)
        self.model = model
        base = openai_base_url(base_url, "judge base URL")
        self.concurrency = CONCURRENCY
        self.label = f"openai:{model}"  # stored with every grade (pgeval.model_grade.judge)
        self._client = JsonClient(
            f"{base}/chat/completions",
            key=key_from_env("OPENAI_API_KEY" if api_key_env is None else api_key_env),
            timeout=timeout or 60.0,
            retries=retries,
            backoff_s=backoff_s,
            field=FIELD,
            retry_field=param("base_url"),
        )

    def grade(self, query: str, passage: str, what: str) -> int:
        """The judge's grade of ``passage`` for ``query``; ``what`` names the pair in an error."""
        answer = self._client.post(
            {
                "model": self.model,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": USER.format(query=query, passage=passage)},
                ],
            }
        )
        try:
            content = answer["choices"][0]["message"]["content"]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            raise InputError(
                f"{self._client.shown_url} answered {what} without choices[0].message.content",
                field=FIELD,
            ) from None
        m = _GRADE.match(content or "")
        if m is None:
            raise InputError(
                f"judge {self.label} answered {what} with "
                f"'{' '.join(str(content).split())[:60]}', not a grade 0-3",
                field=FIELD,
            )
        return int(m.group(1))
