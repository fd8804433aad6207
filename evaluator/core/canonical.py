"""One canonical JSON, one content hash: how pgeval names a configuration, a ground truth's slot,
a checksum's cache key or a sweep's default name by what it holds.

``canonical_json`` sorts keys and writes no whitespace; ``sha256_hex`` hashes its UTF-8 bytes.
Each stored hash keeps the spelling it was first stored with (``ascii``: non-ASCII characters
escaped as ``\\uXXXX``; ``compact=False``: json's default ``", "`` and ``": "`` separators), so
that nothing a user stored is invalidated; new uses take the defaults.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any, *, ascii: bool = False, compact: bool = True) -> str:
    """Sorted keys; no whitespace unless ``compact=False``; values json cannot write as ``str``."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":") if compact else None,
        ensure_ascii=ascii,
        default=str,
    )


def sha256_hex(value: Any, *, ascii: bool = False, compact: bool = True) -> str:
    """The sha256 (hex) of ``value``'s canonical JSON."""
    text = canonical_json(value, ascii=ascii, compact=compact)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
