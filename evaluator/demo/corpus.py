"""A generated knowledge base for `pgeval demo`: topical chunks, graded queries, and embeddings
made by feature hashing (a real, if weak, bag-of-words embedding: each word is hashed to a
dimension and a sign; vectors are L2-normalised). Deterministic for a given seed; no model, no
network."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

WORDS = """account address alarm answer apple battery bill board boat bottle branch bread bridge
budget cable camera card carpet castle chair charge cheese city claim clock cloud coat coffee
column contract copy cost cotton country credit crowd cup customer data date debt delivery
desk device diet dinner doctor door drawer driver engine error estate event exam factory fee
field file filter flight floor flower folder forest form fuel garden gate glass glove grade
guest hammer harbor health heater hotel house index invoice island jacket kernel key kitchen
ladder lamp laptop lawyer leader lemon letter license light limit loan lock machine manual
market meal medicine memory menu message meter mirror model monitor motor mountain network
notice number office oven owner package page paint panel paper parcel partner password
patient payment pencil phone piano picture pilot pipe plan plant plate pocket policy port
printer profit program pump queue radio rail receipt record refund region rent report river
road roof route router salary sample schedule school screen season seat server shelf ship shop
signal silver sink socket software sound station steel storage store street student subway
table tank tax teacher ticket timer token tool tower track traffic train travel truck tunnel
update user valve vehicle video village wallet warranty water wheel window winter wire yard""".split()

GENERAL = """the a of to and in for on with by from about how when what which after before
during into over under new old first last other same more most some any each every""".split()


@dataclass
class Corpus:
    chunks: list[tuple[str, str]]  # (chunk_id, text)
    vectors: np.ndarray  # len(chunks) x dim
    queries: list[dict]  # JSONL test-set records (with "embedding")


def embed(text: str, dim: int) -> np.ndarray:
    """Feature-hashing embedding of ``text`` (lower-cased words), L2-normalised."""
    v = np.zeros(dim, dtype=np.float32)
    for word in text.lower().split():
        h = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        v[idx] += 1.0 if h[4] & 1 else -1.0
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def generate(
    n_topics: int = 40,
    chunks_per_topic: int = 25,
    n_queries: int = 80,
    dim: int = 128,
    seed: int = 7,
) -> Corpus:
    rng = random.Random(seed)
    words = WORDS[:]
    rng.shuffle(words)
    per = max(4, len(words) // n_topics)
    topics = [words[i * per : (i + 1) * per] for i in range(n_topics)]
    chunks, by_topic = [], []
    for t, vocab in enumerate(topics):
        ids = []
        for j in range(chunks_per_topic):
            body = [
                rng.choice(vocab)
                if rng.random() < 0.35
                else rng.choice(WORDS if rng.random() < 0.5 else GENERAL)
                for _ in range(24)
            ]
            cid = f"t{t:02d}c{j:02d}"
            chunks.append((cid, " ".join(body)))
            ids.append(len(chunks) - 1)
        by_topic.append(ids)
    queries = []
    types_cycle = [
        ["exact", "single_answer"],
        ["fuzzy", "multi_answer"],
        ["long_tail"],
        ["high_frequency", "multi_answer"],
    ]
    for q in range(n_queries):
        t = q % n_topics
        qwords = rng.sample(topics[t], k=min(3, len(topics[t])))
        if rng.random() < 0.5:
            qwords.append(rng.choice(WORDS))  # a distracting word
        text = " ".join(qwords)
        qset = set(qwords)
        scored = sorted(
            ((sum(w in qset for w in chunks[i][1].split()), chunks[i][0]) for i in by_topic[t]),
            reverse=True,
        )
        relevant = {}
        for rank, (overlap, cid) in enumerate(scored[: rng.randint(2, 5)]):
            if overlap == 0:
                break
            relevant[cid] = 3 if rank == 0 else 2 if rank < 3 else 1
        record: dict[str, Any] = {
            "id": f"q{q + 1:03d}",
            "query": text,
            "relevant": relevant,
            "type": types_cycle[q % len(types_cycle)],
            "embedding": [round(float(x), 6) for x in embed(text, dim)],
        }
        if not relevant:
            record["answerable"] = False
        queries.append(record)
    vectors = np.stack([embed(text, dim) for _, text in chunks])
    return Corpus(chunks=chunks, vectors=vectors, queries=queries)
