"""The types a vector column is searched as, one object each (as pgvector-python keeps one object
per vector type): ``vector``, ``halfvec`` (a cast, half the index size) and ``bit`` (binary
quantization: ``binary_quantize(col)::bit(N)`` by Hamming distance, its candidates re-ranked by
the full vector, pgvector's README "Binary Quantization").

What differs between them is read here and nowhere else: the operator and operator class a
search by a distance uses, the expression the column and the query vector become, whether the
search is of a quantized copy whose candidates are re-ranked, and how to ask a server whether it
has the type. Stage kinds name the type they search (``kinds.registry.Kind.cast_type``)."""

from __future__ import annotations

from dataclasses import dataclass

# the target's distance -> pgvector's operator
DISTANCES = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}


@dataclass(frozen=True)
class SearchType:
    """One type searched: its name and, for a quantized copy, the function that makes it from a
    ``vector`` and the one operator (and operator class) it is searched by, whatever the
    target's distance (the re-ranking uses that one)."""

    name: str
    quantizer: str | None = None  # binary_quantize: the column and the query go through it
    operator_name: str | None = None  # <~> (Hamming): whatever the distance
    opclass_name: str | None = None  # bit_hamming_ops

    @property
    def quantized(self) -> bool:
        """A quantized copy: its nearest candidates are re-ranked by the full vector (the
        two-level statement of ``stages.vector_sql.binary_quantized``)."""
        return self.quantizer is not None

    def operator(self, distance: str) -> str:
        return self.operator_name or DISTANCES[distance]

    def opclass(self, distance: str) -> str:
        """The operator class an index needs to serve a search of this type by ``distance``."""
        return self.opclass_name or f"{self.name}_{distance}_ops"

    def serves(self, index_expression: str | None) -> bool:
        """Whether an index on ``index_expression`` (None: a plain column) holds this type as a
        search makes it: a quantized type only on its quantizer's expression."""
        return self.quantizer is None or self.quantizer in (index_expression or "")

    def known_sql(self) -> tuple[str, tuple[str, ...]]:
        """A query (and its parameters) whose one value says whether a server can search this
        type: the quantizer's function (``bit`` is core, the quantizer pgvector 0.7's), else the
        type itself."""
        if self.quantizer is not None:
            return "SELECT to_regprocedure(%s) IS NOT NULL", (f"{self.quantizer}(vector)",)
        return "SELECT to_regtype(%s) IS NOT NULL", (self.name,)


TYPES: dict[str, SearchType] = {
    t.name: t
    for t in (
        SearchType("vector"),
        SearchType("halfvec"),
        SearchType(
            "bit",
            quantizer="binary_quantize",
            operator_name="<~>",
            opclass_name="bit_hamming_ops",
        ),
    )
}


def search_type(name: str) -> SearchType:
    """The description of type ``name`` (vector, halfvec, bit)."""
    return TYPES[name]
