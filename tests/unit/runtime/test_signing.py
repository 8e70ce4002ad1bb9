"""Signed envelopes: what a forger cannot do, and how services agree on one key."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from memoria_runtime.bus.signing import (
    KEY_ID_KEY,
    SIGNATURE_HEADER,
    SharedKeyMismatch,
    Signer,
    ensure_shared_key,
    reply_channel,
    signer_for,
)
from memoria_runtime.local_secrets import load_or_create_secret
from memoria_runtime.settings import Settings

BODY = b'{"user_id": "ana", "payload": {"type": "user_message"}}'


def test_a_signature_holds_only_for_its_channel_body_and_key() -> None:
    signer = Signer("k1")
    headers = signer.headers("memoria:chat.in", BODY)
    assert signer.problem("memoria:chat.in", BODY, headers) is None
    assert "bad signature" in str(signer.problem("memoria:chat.out", BODY, headers))
    assert "bad signature" in str(signer.problem("memoria:chat.in", BODY + b" ", headers))
    assert "bad signature" in str(Signer("k2").problem("memoria:chat.in", BODY, headers))
    assert "missing signature" in str(signer.problem("memoria:chat.in", BODY, {}))
    assert "missing signature" in str(signer.problem("memoria:chat.in", BODY, None))
    odd = {SIGNATURE_HEADER: 12}
    assert "bad signature" in str(signer.problem("memoria:chat.in", BODY, odd))


def test_a_reply_is_bound_to_its_request() -> None:
    signer = Signer("k1")
    headers = signer.headers(reply_channel("evt_1"), BODY)
    assert signer.problem(reply_channel("evt_1"), BODY, headers) is None
    assert signer.problem(reply_channel("evt_2"), BODY, headers) is not None


def test_the_fingerprint_names_the_key_without_showing_it() -> None:
    assert Signer("k1").fingerprint == Signer("k1").fingerprint
    assert Signer("k1").fingerprint != Signer("k2").fingerprint
    assert "k1" not in Signer("k1").fingerprint
    with pytest.raises(ValueError, match="empty"):
        Signer("")


def test_a_configured_secret_wins_over_the_data_directory(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, bus_secret=SecretStr("configured"), _env_file=None)
    assert signer_for(settings).fingerprint == Signer("configured").fingerprint
    assert not (tmp_path / "bus_secret").exists()


def _read_secret(data_dir: str, queue: multiprocessing.Queue[str]) -> None:
    settings = Settings(data_dir=Path(data_dir), _env_file=None)
    queue.put(load_or_create_secret(settings, None, "bus_secret"))


def test_processes_starting_together_agree_on_one_generated_secret(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[str] = context.Queue()
    processes = [
        context.Process(target=_read_secret, args=(str(tmp_path), queue)) for _ in range(6)
    ]
    for process in processes:
        process.start()
    secrets = {queue.get(timeout=60) for _ in processes}
    for process in processes:
        process.join(60)
    assert len(secrets) == 1 and len(secrets.pop()) >= 32
    assert (tmp_path / "bus_secret").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["bus_secret"]  # no drafts left behind


async def test_a_service_with_another_key_refuses_to_start(redis: Redis) -> None:
    await ensure_shared_key(redis, Signer("shared"))
    await ensure_shared_key(redis, Signer("shared"))  # the same key again: fine
    with pytest.raises(SharedKeyMismatch, match=KEY_ID_KEY):
        await ensure_shared_key(redis, Signer("another"))
    await redis.delete(KEY_ID_KEY)  # what the rotation procedure says to do
    await ensure_shared_key(redis, Signer("another"))
