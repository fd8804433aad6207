"""JSON over HTTP POST for the embedding and rerank APIs and the service stage: retries with
exponential backoff (honouring ``Retry-After``, seconds or an HTTP date) on 429, 5xx and network
errors; any other 4xx stops at once with the server's own message. The API key is sent as a bearer
token (or in the header ``key_header`` names, e.g. WeKnora's ``X-API-Key``); it and any password
or key written in the URL are masked in every message (:mod:`evaluator.core.masking`).

A failure raises :class:`HttpFailure` (an InputError) carrying the last HTTP status (None for a
network error or a timeout) and the attempts made; :meth:`JsonClient.post_timed` also gives the
round trip of the answered request."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core import masking
from ..core.errors import InputError, param

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_BACKOFF_S = 30.0


class HttpFailure(InputError):
    """A request that got no usable answer: ``status`` (the last HTTP status, 200 for an answer
    that is not JSON, None when no answer came: timeout, connection refused), ``attempts``."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        attempts: int = 1,
        field: str | None = None,
    ):
        super().__init__(message, field=field)
        self.status, self.attempts = status, attempts


def check_url(url: str, what: str, field: str) -> None:
    """InputError unless ``url`` is http(s) without a user or password in it (urllib cannot send
    them, and a password in a URL ends up in shell histories: the key goes in an environment
    variable)."""
    masking.remember(url)
    if not url.startswith(("http://", "https://")):
        raise InputError(
            f"{what} '{masking.mask(url)}' must start with http:// or https://", field=field
        )
    netloc = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in netloc:
        raise InputError(
            f"{what} '{masking.mask(url)}' holds a user name or password: remove "
            f"it and put the API key in an environment variable ({param('api_key_env')})",
            field=field,
        )


def openai_base_url(base_url: str | None, what: str) -> str:
    """An OpenAI-compatible API's base URL, checked (:func:`check_url`, ``what`` naming it):
    ``base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's; no trailing slash."""
    base = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip(
        "/"
    )
    check_url(base, what, param("base_url"))
    return base


def key_from_env(env: str | None) -> str | None:
    """The API key in environment variable ``env`` (None or '': no key, for local servers);
    InputError naming ``api_key_env`` when the variable is not set. The key is never printed."""
    if not env:
        return None
    key = os.environ.get(env)
    if not key:
        raise InputError(
            f"environment variable {env} is not set (it must hold "
            f"the API key; name another with {param('api_key_env')}, or pass "
            f"{param('api_key_env')} '' for a server without keys)",
            field=param("api_key_env"),
        )
    return key


@dataclass
class JsonClient:
    url: str
    key: str | None = None
    timeout: float = 60.0
    retries: int = 4
    backoff_s: float = 0.5
    field: str | None = None  # the option a user changes when the server refuses
    retry_field: str | None = None  # ... and when it cannot be reached (default: field)
    requests: int = 0  # requests sent, retries included (reports and tests)
    key_header: str = "Authorization"  # where the key goes ("Authorization": as a bearer token)
    max_backoff_s: float = MAX_BACKOFF_S

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        masking.remember(self.url)
        if self.key:
            masking.remember_secret(self.key)
        self.shown_url = masking.mask(self.url)  # the URL as messages show it

    def scrub(self, text: str) -> str:
        return masking.mask(text)

    def post(self, body: dict, hint_4xx: Callable[[int], str] | None = None) -> object:
        """The decoded JSON answer to ``body``; InputError on a refusal or after the retries.
        ``hint_4xx(code)`` may add advice to a 4xx message (e.g. which variable holds the key)."""
        return self.post_timed(body, hint_4xx)[0]

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            if self.key_header.lower() == "authorization":
                headers["Authorization"] = f"Bearer {self.key}"
            else:
                headers[self.key_header] = self.key
        return headers

    def post_timed(
        self, body: dict, hint_4xx: Callable[[int], str] | None = None
    ) -> tuple[object, float, int]:
        """(decoded JSON answer, round trip of the answered request in ms: from sending it to the
        last byte of its body read, attempts). Safe to call from several threads at once.
        Raises :class:`HttpFailure`."""
        headers = self._headers()
        data = json.dumps(body).encode("utf-8")
        last, status = "", None
        for attempt in range(self.retries + 1):
            with self._lock:
                self.requests += 1
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            wait = None
            try:
                t0 = time.perf_counter()
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read().decode("utf-8", "replace")
                ms = (time.perf_counter() - t0) * 1000.0
                try:
                    return json.loads(raw), ms, attempt + 1
                except ValueError as exc:
                    raise HttpFailure(
                        f"{self.shown_url} answered something that is not JSON "
                        f"({self.scrub(str(exc))}): "
                        f"{self.scrub(' '.join(raw.split())[:120])!r}",
                        status=200,
                        attempts=attempt + 1,
                        field=self.retry_field or self.field,
                    ) from None
            except urllib.error.HTTPError as exc:
                detail = self.scrub(error_message(exc))
                status = exc.code
                if exc.code != 429 and exc.code < 500:
                    hint = hint_4xx(exc.code) if hint_4xx else ""
                    raise HttpFailure(
                        f"{self.shown_url} answered HTTP {exc.code}: {detail}{hint}",
                        status=exc.code,
                        attempts=attempt + 1,
                        field=self.field,
                    ) from None
                last = f"HTTP {exc.code}: {detail}"
                wait = retry_after(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                status = None
                if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                    last = f"no answer within the timeout of {self.timeout:g} s"
                else:
                    last = self.scrub(str(reason)) or exc.__class__.__name__
            if attempt < self.retries:
                backoff = self.backoff_s * (2**attempt) if wait is None else wait
                time.sleep(min(self.max_backoff_s, backoff))
        raise HttpFailure(
            f"{self.shown_url} failed after {self.retries + 1} attempts: {last}",
            status=status,
            attempts=self.retries + 1,
            field=self.retry_field or self.field,
        )


def error_message(exc: urllib.error.HTTPError) -> str:
    """The server's own message from an HTTP error body (JSON ``error.message`` or the text)."""
    try:
        raw = exc.read().decode("utf-8", "replace")
    except Exception:
        raw = ""
    try:
        doc = json.loads(raw)
        err = doc.get("error", doc) if isinstance(doc, dict) else doc
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return " ".join(str(msg).split())[:300]
    except ValueError:
        pass
    return " ".join(raw.split())[:300] or (exc.reason or "")


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        when = parsedate_to_datetime(value.strip())
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
