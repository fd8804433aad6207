"""Keeping secrets out of every message, output and report: the one place pgeval masks them.

Two layers, both applied by :func:`mask`:

1. Patterns: the password of a URI (``scheme://user:PASSWORD@host``, any scheme, any case, a
   password holding ``@``; the scheme misspelled or missing: ``postgres//user:PASSWORD@host``,
   ``postgresql:/...``, ``user:PASSWORD@host``), a libpq ``password=`` keyword (quoted, spaced,
   unterminated, misspelled: ``passwd=``, ``pasword=``), query
   parameters and assignments that carry keys (``?api_key=``, ``&key=``, ``token=``,
   ``Authorization: Bearer ...``).
2. Known secrets: the passwords and keys of every connection string and URL pgeval was given
   (:func:`remember`, fed by the CLI's arguments, ``PGEVAL_DSN``, ``PGEVAL_RESULTS_DSN``,
   ``PGPASSWORD``, and :class:`evaluator.core.db.Database`). A driver that cannot parse a DSN quotes the
   bad token (``invalid percent-encoded token: "50%off-..."``) or a piece of it (a host
   ``secret@h`` after a password holding ``@``): any run of 4 or more characters of a known
   secret (the whole secret when shorter) is masked wherever it appears.

Masking over-reaches on purpose (a word that happens to be part of a password is masked too):
a masked word costs less than a leaked password.
"""

from __future__ import annotations

import os
import re
from typing import Any, overload
from urllib.parse import quote, unquote

MASK = "***"
MIN_SECRET = 3  # shorter "secrets" are not remembered (they would mask every other word)
MIN_FRAGMENT = 4  # a run this long of a known secret is masked wherever it appears

# [scheme://]user:password@host...: whatever spells the scheme (``postgres//``, ``postgresql:/``,
# none): the user starts the text, a word, a quoted token or follows a '/'; the netloc runs to
# the first / ? # or blank; the password runs from the user's ':' to the netloc's LAST '@'.
_URI = re.compile(r"(?<![^\s\"'=/])([^\s\"'=/?#@:]*:)([^\s/?#]*)@(?=[^\s/?#@]*(?:[\s/?#]|$))")
# the same, generously, for the secrets to remember: a password holding '/' ("u:p/w@h" after a
# misspelled scheme) runs to the last '@' of its word
_USERINFO = re.compile(r"(?<![^\s\"'=/])[^\s\"'=/?#@:]*:([^\s/:]\S*)@(?=[^\s@]*(?:\s|$))")
_PW_WORD = r"\b(?:pass?w(?:or|ro)?d|pwd)\b"  # and its typos: pasword, passwd, passwrod, pwd
# (a ':' ending the value before a blank is the message's separator, not the password's)
_PW_VALUE = r"('(?:[^'\\]|\\.)*(?:'|$)|\"(?:[^\"\\]|\\.)*(?:\"|$)|\S+?(?=:\s|\s|$))"
_KW_PASSWORD = re.compile(rf"(?i)({_PW_WORD}\s*=\s*)(?!\*\*\*){_PW_VALUE}")
# in a key=value DSN given to pgeval, the '=' forgotten too ("password S3cret")
_KW_LOOSE = re.compile(rf"(?i)({_PW_WORD}\s*[=:]?\s*)(?!\*\*\*){_PW_VALUE}")
_PARAM = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.\-]*(?:key|token|secret|passw(?:or)?d|pwd|signature|"
    r"sig|auth)[a-z0-9_.\-]*)=)([^&#\s\"']*)"
)
# (a value already masked, followed by a separator, is left as it is: the ':' after
# "password=***" in "cannot connect to ... password=***: refused" is the message's)
_ASSIGN = re.compile(
    r"(?i)(\b(?:api[_-]?key|access[_-]?token|token|secret|password|passwd|"
    r"authorization)\s*[=:]\s*(?:bearer\s+|basic\s+)?)(?!\*\*\*(?:[\s:;,]|$))([^\s&,;\"']+)"
)
_BEARER = re.compile(r"(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/=\-]{8,})")
_ENV_DSNS = ("PGEVAL_DSN", "PGEVAL_RESULTS_DSN")

_known: set[str] = set()


def forget() -> None:
    """Forget the remembered secrets (the CLI starts each command with a clean slate)."""
    _known.clear()


def remember_secret(secret: str | None) -> None:
    """Remember one secret as it is (an API key read from the environment)."""
    if not secret or len(secret) < MIN_SECRET:
        return
    for form in (secret, unquote(secret), quote(secret, safe=""), quote(secret)):
        if len(form) >= MIN_SECRET:
            _known.add(form)


def secrets_in(text: str | None) -> list[str]:
    """The passwords and keys written in ``text`` (a DSN in URI or key=value form, a URL, an
    option such as ``rerank:reranker=http://u:p@h``), as written: malformed ones included."""
    if not text:
        return []
    found = []
    for m in re.finditer(r"(?i)[a-z][a-z0-9+.\-]*://", text):
        rest = text[m.end() :]
        # the user info, generously: up to the last '@' before the next URI (spaces allowed,
        # as in a malformed password "two words")
        nxt = re.search(r"(?i)[a-z][a-z0-9+.\-]*://", rest)
        rest = rest[: nxt.start()] if nxt else rest
        if "@" in rest:
            userinfo = rest.rpartition("@")[0]
            if ":" in userinfo:
                found.append(userinfo.split(":", 1)[1])
            # the host part the driver may quote holds the tail after a first '@'
            if userinfo.count("@") and ":" in userinfo:
                found.extend(p for p in userinfo.split(":", 1)[1].split("@") if p)
    for m in _USERINFO.finditer(text):  # a misspelled or missing scheme
        found.extend([m.group(1), *(p for p in m.group(1).split("@") if "@" in m.group(1))])
    for m in (_KW_LOOSE if "=" in text else _KW_PASSWORD).finditer(text):
        value = m.group(2)
        if value[0] in "'\"":
            quote_ = value[0]
            value = value[1:-1] if len(value) > 1 and value.endswith(quote_) else value[1:]
            value = re.sub(r"\\(.)", r"\1", value)
        found.append(value)
    for pattern in (_PARAM, _ASSIGN, _BEARER):
        found.extend(m.group(2) for m in pattern.finditer(text))
    return [f for f in found if f]


def remember(*texts: str | None) -> None:
    """Remember the secrets written in each DSN or URL, so that :func:`mask` hides them (and the
    pieces a driver quotes) in any message."""
    for text in texts:
        for secret in secrets_in(text):
            remember_secret(secret)


def _current() -> list[str]:
    known = set(_known)
    pw = os.environ.get("PGPASSWORD")
    if pw and len(pw) >= MIN_SECRET:
        known.add(pw)
    for var in _ENV_DSNS:
        for s in secrets_in(os.environ.get(var)):
            if len(s) >= MIN_SECRET:
                known.update({s, unquote(s)})
    return sorted(known, key=len, reverse=True)


def _fragments(text: str, secret: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are runs of ``secret`` at least MIN_FRAGMENT long (or all of it)."""
    need = min(len(secret), MIN_FRAGMENT)
    spans, i = [], 0
    while i <= len(text) - need:
        if text[i : i + need] in secret:
            j = i + need
            while j < len(text) and text[i : j + 1] in secret:
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    return spans


@overload
def mask(text: str, *, known: bool = True) -> str: ...
@overload
def mask(text: None, *, known: bool = True) -> None: ...
def mask(text: str | None, *, known: bool = True) -> str | None:
    """``text`` with every password and key (patterns, and known secrets unless ``known`` is
    False) replaced by ``***``. ``known=False`` gives the same result whatever pgeval was told
    (what a hash such as the configuration fingerprint needs)."""
    if not text:
        return text
    for secret in _current() if known else ():
        if secret in text:
            text = text.replace(secret, MASK)
    for secret in _current() if known else ():
        spans = _fragments(text, secret)
        for start, end in reversed(spans):
            text = text[:start] + MASK + text[end:]
    text = _URI.sub(lambda m: m.group(1) + (MASK if m.group(2) else "") + "@", text)
    text = _KW_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    text = _PARAM.sub(lambda m: m.group(1) + MASK, text)
    text = _ASSIGN.sub(lambda m: m.group(1) + MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    return text


def mask_value(value: object, *, known: bool = True) -> Any:
    """:func:`mask` over the strings of a JSON-like value (dicts, lists; keys become strings)."""
    if isinstance(value, str):
        return mask(value, known=known)
    if isinstance(value, dict):
        return {str(k): mask_value(v, known=known) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(v, known=known) for v in value]
    return value
