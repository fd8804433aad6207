"""A logged statement read as a search: the target's vector column ordered by a distance operator
under a LIMIT, its query vector from a bind parameter (any position) or an inline literal (with
or without a cast), reduced to its *shape*: the statement with parameters in place of its
literals, numbered so that ``$1`` is the query vector and ``$2``, ``$3`` ... the other values in
the order the application numbered them (what ``pgeval.evaluate_recall`` binds).

A statement is read by a small lexer that knows PostgreSQL's literals, quoted identifiers,
comments and dollar quotes; a literal that is a type modifier (``vector(384)``), a typed literal
(``interval '1 day'``) or a position in ORDER BY / GROUP BY stays as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# pgvector's distance operators: L2, cosine, negative inner product, L1, Hamming, Jaccard
DISTANCE_OPERATORS = ("<->", "<=>", "<#>", "<+>", "<~>", "<%>")
_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      |(?P<comment>--[^\n]*|/\*.*?\*/)
      |(?P<string>[eE]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*')
      |(?P<dollar>\$(?P<tag>[A-Za-z_]\w*)?\$.*?\$(?P=tag)?\$)
      |(?P<qident>"(?:[^"]|"")*")
      |(?P<param>\$\d+)
      |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
      |(?P<ident>[A-Za-z_\u0080-\uffff][\w$\u0080-\uffff]*)
      |(?P<cast>::)
      |(?P<op>[+\-*/<>=~!@\#%^&|`?]+)
      |(?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
_CLAUSES = {"select", "from", "where", "group", "order", "having", "limit", "offset", "fetch"}
_CLAUSES |= {"window", "union", "returning", "on", "join", "with", "values"}
# words before a string literal that make it a value (anything else before it: a typed literal)
_BEFORE_VALUE = {"like", "ilike", "in", "then", "else", "and", "or", "when", "not", "is", "by"}
_BEFORE_VALUE |= {"similar", "escape", "limit", "offset", "select", "between", "array", "any"}
_BEFORE_VALUE |= {"all", "some", "values", "return", "as", "on", "where", "having", "distinct"}
_SPACED = {"by", "in", "and", "or", "not", "exists", "from", "as", "join", "on", "using", "where"}
_END_KEY = {"limit", "offset", "fetch", "asc", "desc", "nulls", "for", "using"}
_VECTOR = re.compile(r"^\s*\[\s*[-+0-9.eEinfaINFA]+(?:\s*,\s*[-+0-9.eEinfaINFA]+)*\s*\]\s*$")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    depth: int  # parentheses open before it


@dataclass(frozen=True)
class Search:
    """One search as the application sent it."""

    shape: str  # the statement, parameters in place of literals; $1 the query vector
    vector: tuple[float, ...]
    params: tuple[str | None, ...]  # $2, $3 ...: the other values as sent (None: NULL)
    limit: int | None  # the LIMIT's value (None: a LIMIT the statement did not fix)
    operator: str
    # columns compared to a parameter (``tenant = $2``, ``tenant IN ($2)``): column -> number
    filters: tuple[tuple[str, int], ...] = ()


class Skip(Exception):
    """Not a search of the target (``reason``: counted, never an error)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Unreadable(Exception):
    """A search of the target whose vector the log does not hold whole (its parameters not
    logged, or cut): the log's settings must change."""


def tokens(text: str) -> list[Token]:
    out: list[Token] = []
    depth = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "other"
        if kind == "tag":
            kind = "dollar"
        if kind in ("ws", "comment"):
            continue
        tok = m.group(0)
        if tok == ")":
            depth -= 1
        out.append(Token(kind if kind != "other" else tok, tok, depth))
        if tok == "(":
            depth += 1
    return out


def _word(t: Token) -> str:
    return t.text.lower() if t.kind == "ident" else ""


def _name(t: Token) -> str:
    """An identifier as PostgreSQL folds it."""
    if t.kind == "qident":
        return t.text[1:-1].replace('""', '"')
    return t.text.lower() if t.kind == "ident" else ""


def string_value(text: str) -> str:
    if text[:1] in "eE":
        body = text[2:-1].replace("''", "'")
        return re.sub(r"\\(.)", r"\1", body)
    return text[1:-1].replace("''", "'")


def vector_of(text: str | None) -> tuple[float, ...] | None:
    """pgvector's text form read as numbers (None: not a whole vector)."""
    if text is None or not _VECTOR.match(text):
        return None
    try:
        return tuple(float(x) for x in text.strip().strip("[]").split(","))
    except ValueError:
        return None


def parameters(detail: str | None) -> dict[int, str | None] | None:
    """``Parameters: $1 = '...', $2 = NULL`` of a DETAIL (None: none logged)."""
    if not detail:
        return None
    at = detail.find("Parameters: ")
    if at < 0:
        return None
    out: dict[int, str | None] = {}
    for m in re.finditer(r"\$(\d+) = (?:(NULL)|'((?:[^']|'')*)')", detail[at:]):
        out[int(m.group(1))] = None if m.group(2) else m.group(3).replace("''", "'")
    return out


def _sort_key(toks: list[Token], start: int) -> tuple[int, int]:
    """The tokens of ORDER BY's first sort key: [start, end)."""
    depth = toks[start].depth
    end = start
    while end < len(toks):
        t = toks[end]
        if t.depth < depth or (t.depth == depth and t.text in (",", ";")):
            break
        if t.depth == depth and _word(t) in _END_KEY:
            break
        end += 1
    return start, end


def _limit(toks: list[Token], after: int, depth: int) -> tuple[int, Token] | None:
    """The LIMIT (or FETCH FIRST n) at ORDER BY's depth after it: (index, its value token)."""
    for i in range(after, len(toks)):
        t = toks[i]
        if t.depth < depth:
            return None
        if t.depth != depth or i + 1 >= len(toks):
            continue
        if _word(t) == "limit" and toks[i + 1].kind in ("number", "param"):
            return i + 1, toks[i + 1]
        if _word(t) == "fetch" and i + 2 < len(toks) and toks[i + 2].kind in ("number", "param"):
            return i + 2, toks[i + 2]
    return None


def _mentions(toks: list[Token], column: str) -> bool:
    return any(_name(t) == column for t in toks)


def _ordering(toks: list[Token], column: str) -> tuple[int, str, int]:
    """(index of the query vector's token, operator, index of the LIMIT's value token)."""
    why = "no ORDER BY"
    for i in range(len(toks) - 1):
        if not (_word(toks[i]) == "order" and _word(toks[i + 1]) == "by") or i + 2 >= len(toks):
            continue
        start, end = _sort_key(toks, i + 2)
        key = toks[start:end]
        ops = [j for j, t in enumerate(key) if t.kind == "op" and t.text in DISTANCE_OPERATORS]
        if not ops:
            why = "no distance operator in ORDER BY"
            continue
        j = ops[0]
        left, right = key[:j], key[j + 1 :]
        side = right if _mentions(left, column) else left if _mentions(right, column) else None
        if side is None:
            why = "another column ordered"
            continue
        found = [k for k, t in enumerate(side) if t.kind in ("param", "string")]
        if not found:
            why = "no vector parameter or literal"
            continue
        vec_at = start + (j + 1 if side is right else 0) + found[0]
        limit = _limit(toks, end, toks[i].depth)
        if limit is None:
            why = "no LIMIT"
            continue
        return vec_at, key[j].text, limit[0]
    raise Skip(why)


def _keeps(toks: list[Token], i: int) -> bool:
    """A literal that stays as written: a type modifier, a typed literal, a position."""
    prev = toks[i - 1] if i else None
    if prev is None:
        return False
    if toks[i].kind == "string":
        return prev.kind == "ident" and _word(prev) not in _BEFORE_VALUE
    # a number: inside the parentheses after ``::type`` or ``AS type``
    j = i - 1
    while j >= 0 and toks[j].kind in ("number", ","):
        j -= 1
    if j >= 2 and toks[j].text == "(" and toks[j - 1].kind == "ident":
        before = toks[j - 2]
        if before.kind == "cast" or _word(before) == "as":
            return True
    if _word(prev) in ("by", "limit", "offset", "first", "next"):
        return True
    return prev.text == "," and _clause(toks, i) in ("order", "group")


def _clause(toks: list[Token], i: int) -> str:
    depth = toks[i].depth
    for j in range(i - 1, -1, -1):
        if toks[j].depth == depth and _word(toks[j]) in _CLAUSES:
            return _word(toks[j])
    return ""


def read(text: str, given: dict[int, str | None] | None, column: str, table: str) -> Search:
    """The search ``text`` sends (``given``: the values of its ``$n`` as logged). Raises
    :class:`Skip` for another statement, :class:`Unreadable` for a search whose vector the log
    does not hold whole."""
    toks = tokens(text)
    if not any(_name(t) == table for t in toks):
        raise Skip("does not read the target's table")
    semis = [k for k, t in enumerate(toks) if t.text == ";"]
    if semis and semis[0] < len(toks) - 1:
        raise Skip("several statements")
    vec_at, operator, limit_at = _ordering(toks, column)
    values: dict[int, str | None] = dict(given or {})
    numbers = [int(t.text[1:]) for t in toks if t.kind == "param"]
    if numbers and given is None:
        raise Unreadable("its parameters are not in the log")
    next_no = max(numbers, default=0)
    literal_no: dict[str, int] = {}
    pieces: list[tuple[Token, int | None]] = []  # a token, or a parameter number in its place
    for k, t in enumerate(toks):
        if t.kind in ("string", "number") and not _keeps(toks, k):
            if t.text not in literal_no:
                next_no += 1
                literal_no[t.text] = next_no
                values[next_no] = string_value(t.text) if t.kind == "string" else t.text
            pieces.append((t, literal_no[t.text]))
        elif t.kind == "param":
            pieces.append((t, int(t.text[1:])))
        else:
            pieces.append((t, None))
    vec_no = pieces[vec_at][1]
    if vec_no is None or vec_no not in values:
        raise Unreadable(f"the value of ${vec_no} is not in the log")
    raw = values[vec_no]
    vector = vector_of(raw)
    if vector is None:
        if raw is not None and raw.endswith("..."):
            raise Unreadable("the query vector is cut short in the log")
        raise Skip("the value ordered by is not a vector")
    used = sorted({n for _, n in pieces if n is not None})
    order = [vec_no] + [n for n in used if n != vec_no]
    renumber = {old: new for new, old in enumerate(order, 1)}
    shape = _joined([(t, None if n is None else renumber[n]) for t, n in pieces])
    limit_no = pieces[limit_at][1]
    limit_text = toks[limit_at].text if limit_no is None else values.get(limit_no)
    try:
        limit = int(limit_text) if limit_text is not None else None
    except ValueError:
        limit = None
    params = tuple(values.get(n) for n in order[1:])
    filters = _filters(toks, [None if n is None else renumber[n] for _, n in pieces])
    return Search(shape, vector, params, limit, operator, filters)


def _filters(toks: list[Token], numbers: list[int | None]) -> tuple[tuple[str, int], ...]:
    """``column = $n``, ``$n = column`` and ``column IN ($n)`` of the statement."""
    out: dict[str, int] = {}
    for i, n in enumerate(numbers):
        if n is None or n == 1:
            continue
        before = toks[i - 1].text if i else ""
        if before == "=" and i >= 2 and _name(toks[i - 2]):
            out.setdefault(_name(toks[i - 2]), n)
        elif i + 2 < len(toks) and toks[i + 1].text == "=" and _name(toks[i + 2]):
            out.setdefault(_name(toks[i + 2]), n)
        elif before == "(" and i >= 3 and _word(toks[i - 2]) == "in" and _name(toks[i - 3]):
            if i + 1 < len(toks) and toks[i + 1].text == ")":
                out.setdefault(_name(toks[i - 3]), n)
    return tuple(sorted(out.items()))


def _joined(pieces: list[tuple[Token, int | None]]) -> str:
    """Tokens written back with one space where two words would otherwise run together."""
    out: list[str] = []
    prev = ""
    for t, n in pieces:
        text = t.text if n is None else f"${n}"
        if out and _spaced(prev, text):
            out.append(" ")
        out.append(text)
        prev = text
    return "".join(out)


def _spaced(prev: str, text: str) -> bool:
    if prev in ("(", "[", "::", ".") or text in (")", "]", ",", "::", ".", ";"):
        return False
    if text == "(":  # a call or a type modifier is written against its name
        return not (prev[-1:].isalnum() or prev[-1:] in ("_", '"')) or prev.lower() in _SPACED
    return True
