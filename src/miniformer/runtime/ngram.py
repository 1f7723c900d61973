"""A token n-gram model of the train split: the reference the probes hold a model's text and preferences against.

Two uses: how text-like a generation is, read as its loss under the trigram model of the training text (works for
characters of any script, where counting dictionary words would not), and the floor of the minimal-pair probe —
what a model that knows only which character follows which (a bigram) already prefers.

Each order is smoothed toward the one below it with a Dirichlet prior (MacKay & Peto 1995):
P(c | ctx) = (count(ctx c) + prior · P(c | shorter ctx)) / (count(ctx) + prior), down to add-one unigrams — no zero
probabilities and no parameters fitted on held-out text.
"""

from __future__ import annotations

import math

import numpy as np


class NgramModel:
    """Counts of every n-gram up to ``order`` in a token sequence, kept sorted for vectorised lookups."""

    def __init__(self, ids: np.ndarray, vocab_size: int, order: int = 3, prior: float = 1.0,
                 counted: NgramModel | None = None) -> None:
        """``counted``: a model of the same ids and vocabulary whose tables this one takes instead of counting them
        again (every order shares the lower orders' counts; the probes ask for several orders of one split)."""
        if order < 1 or not self.fits(order, vocab_size):
            raise ValueError(f"order {order} over a vocabulary of {vocab_size} does not fit an int64 key")
        ids = np.asarray(ids, dtype=np.int64)
        self.vocab_size, self.order, self.prior = vocab_size, order, prior
        if counted is not None:
            self.unigram, self.tables = counted.unigram, counted.tables[: order - 1]
        else:
            self.unigram = (np.bincount(ids, minlength=vocab_size) + 1.0) / (len(ids) + vocab_size)
            # per order n >= 2: (sorted n-gram keys, their counts, sorted (n-1)-gram context keys, their counts)
            self.tables = []
        for n in range(2 + len(self.tables), order + 1):
            self.tables.append((*np.unique(self._keys(ids, n), return_counts=True), *self._contexts(ids, n)))

    def _contexts(self, ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The sorted (n-1)-gram context keys of every n-gram and their counts: the (n-1)-grams of ids less the last
        one (no token follows it). Taken from the order below's table rather than sorted again: sorting a split's
        keys is most of a model's making, and the probes make one per run."""
        if n == 2:
            counts = np.bincount(ids[:-1], minlength=self.vocab_size)
            keys = np.flatnonzero(counts)
            return keys.astype(np.int64), counts[keys]
        keys, counts = self.tables[n - 3][:2]
        if len(ids) >= n - 1:  # the last window of n - 1 tokens starts no n-gram
            at = np.searchsorted(keys, self._keys(ids[len(ids) - n + 1 :], n - 1)[0])
            counts = counts.copy()
            counts[at] -= 1
            if counts[at] == 0:
                keys, counts = np.delete(keys, at), np.delete(counts, at)
        return keys, counts

    @staticmethod
    def fits(order: int, vocab_size: int) -> bool:
        """Whether every n-gram of this order has a distinct int64 key (a large vocabulary limits the order)."""
        return order * math.log2(max(vocab_size, 2)) <= 62

    def _keys(self, ids: np.ndarray, n: int) -> np.ndarray:
        """The base-V number of every window of n consecutive tokens."""
        if len(ids) < n:
            return np.zeros(0, dtype=np.int64)
        key = np.zeros(len(ids) - n + 1, dtype=np.int64)
        for k in range(n):
            key = key * self.vocab_size + ids[k : len(ids) - n + 1 + k]
        return key

    @staticmethod
    def _count(keys: np.ndarray, counts: np.ndarray, query: np.ndarray) -> np.ndarray:
        at = np.searchsorted(keys, query)
        found = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == query)
        return np.where(found, counts[np.minimum(at, len(keys) - 1)], 0).astype(np.float64)

    def token_log_probs(self, ids: list[int] | np.ndarray) -> np.ndarray:
        """log P(ids[t] | the up to order − 1 tokens before it) for every t (the first tokens use shorter contexts)."""
        ids = np.asarray(ids, dtype=np.int64)
        p = self.unigram[ids]
        for n, (gk, gc, ck, cc) in zip(range(2, self.order + 1), self.tables):
            if len(ids) < n:
                break
            gram, ctx = self._keys(ids, n), self._keys(ids[:-1], n - 1)
            tail = p[n - 1 :]
            p = p.copy()
            p[n - 1 :] = (self._count(gk, gc, gram) + self.prior * tail) / (self._count(ck, cc, ctx) + self.prior)
        return np.log(p)

    def next_token_log_probs(self) -> np.ndarray:
        """The (V, V) table log P(b | a) of the order-2 model (a bigram, whatever ``order`` is)."""
        if self.order < 2:
            raise ValueError("a unigram model has no next-token table")
        gk, gc, ck, cc = self.tables[0]
        a, b = np.divmod(np.arange(self.vocab_size * self.vocab_size, dtype=np.int64), self.vocab_size)
        p = (self._count(gk, gc, a * self.vocab_size + b) + self.prior * self.unigram[b]) / (
            self._count(ck, cc, a) + self.prior)
        return np.log(p).reshape(self.vocab_size, self.vocab_size)

    def pseudo_log_likelihood(self, ids: list[int] | np.ndarray) -> np.ndarray:
        """log P(ids[t] | ids[t − 1], ids[t + 1]) for every t under the bigram, ∝ P(c | left) · P(right | c): each
        token hidden in turn with one neighbour on each side (the first has no left one, the last no right one)."""
        ids = np.asarray(ids, dtype=np.int64)
        table = self.next_token_log_probs()
        scores = np.tile(np.log(self.unigram), (len(ids), 1))  # (n, V): candidates c for every position
        scores[1:] = table[ids[:-1]]  # log P(c | left)
        scores[:-1] += table[:, ids[1:]].T  # + log P(right | c)
        scores -= np.logaddexp.reduce(scores, axis=1, keepdims=True)
        return scores[np.arange(len(ids)), ids]

    def loss(self, ids: list[int] | np.ndarray) -> float:
        """Mean negative log-probability per token (nats)."""
        return float(-self.token_log_probs(ids).mean())
