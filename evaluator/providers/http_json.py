"""JSON over HTTP POST for the embedding and rerank APIs: retries with exponential backoff
(honouring ``Retry-After``) on 429, 5xx and network errors; any other 4xx stops at once with the
server's own message. The API key is sent as a bearer token; it and any password or key written
in the URL are masked in every message (:mod:`evaluator.core.masking`)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from ..core import masking
from ..core.errors import InputError

MAX_BACKOFF_S = 30.0


def check_url(url: str, what: str, field: str) -> None:
    """InputError unless ``url`` is http(s) without a user or password in it (urllib cannot send
    them, and a password in a URL ends up in shell histories: the key goes in an environment
    variable)."""
    masking.remember(url)
    if not url.startswith(("http://", "https://")):
        raise InputError(f"{what} '{masking.mask(url)}' must start with http:// or https://",
                         field=field)
    netloc = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in netloc:
        raise InputError(f"{what} '{masking.mask(url)}' holds a user name or password: remove "
                         "it and put the API key in an environment variable (--api-key-env)",
                         field=field)


@dataclass
class JsonClient:
    url: str
    key: str | None = None
    timeout: float = 60.0
    retries: int = 4
    backoff_s: float = 0.5
    field: str | None = None          # the option a user changes when the server refuses
    retry_field: str | None = None    # ... and when it cannot be reached (default: field)
    requests: int = 0                 # requests sent, retries included (reports and tests)

    def __post_init__(self):
        masking.remember(self.url)
        if self.key:
            masking.remember_secret(self.key)
        self.shown_url = masking.mask(self.url)   # the URL as messages show it

    def scrub(self, text: str) -> str:
        return masking.mask(text)

    def post(self, body: dict, hint_4xx=None) -> object:
        """The decoded JSON answer to ``body``; InputError on a refusal or after the retries.
        ``hint_4xx(code)`` may add advice to a 4xx message (e.g. which variable holds the key)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        data = json.dumps(body).encode("utf-8")
        last = ""
        for attempt in range(self.retries + 1):
            self.requests += 1
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            wait = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read().decode("utf-8")
                try:
                    return json.loads(raw)
                except ValueError as exc:
                    raise InputError(f"{self.shown_url} answered something that is not JSON: "
                                     f"{self.scrub(str(exc))}",
                                     field=self.retry_field or self.field) from None
            except urllib.error.HTTPError as exc:
                detail = self.scrub(error_message(exc))
                if exc.code != 429 and exc.code < 500:
                    hint = hint_4xx(exc.code) if hint_4xx else ""
                    raise InputError(f"{self.shown_url} answered HTTP {exc.code}: {detail}{hint}",
                                     field=self.field) from None
                last = f"HTTP {exc.code}: {detail}"
                wait = retry_after(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = self.scrub(str(getattr(exc, "reason", exc)))
            if attempt < self.retries:
                time.sleep(min(MAX_BACKOFF_S, wait if wait is not None
                               else self.backoff_s * (2 ** attempt)))
        raise InputError(f"{self.shown_url} failed after {self.retries + 1} attempts: {last}",
                         field=self.retry_field or self.field)


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
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
