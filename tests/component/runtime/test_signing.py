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
    settings = Settings.load(data_dir=tmp_path, bus_secret=SecretStr("configured"), _env_file=None)
    assert signer_for(settings.bus).fingerprint == Signer("configured").fingerprint
    assert not (tmp_path / "bus_secret").exists()


def _read_secret(data_dir: str, queue: multiprocessing.Queue[str]) -> None:
    settings = Settings.load(data_dir=Path(data_dir), _env_file=None)
    queue.put(load_or_create_secret(settings.data, None, "bus_secret"))


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


def test_during_a_rotation_both_secrets_are_accepted_and_only_the_current_one_signs() -> None:
    step_1 = Signer("old", next_secret="new")
    step_2 = Signer("new", previous_secret="old")
    written_before = Signer("old").headers("memoria:chat.in", BODY)
    written_by_step_2 = step_2.headers("memoria:chat.in", BODY)
    assert step_1.problem("memoria:chat.in", BODY, written_by_step_2) is None
    assert step_2.problem("memoria:chat.in", BODY, written_before) is None
    assert step_1.headers("memoria:chat.in", BODY) == written_before  # signs with "old"
    assert written_by_step_2 == Signer("new").headers("memoria:chat.in", BODY)
    assert Signer("new").problem("memoria:chat.in", BODY, written_before) is not None
    forged = Signer("another").headers("memoria:chat.in", BODY)
    assert "bad signature" in str(step_2.problem("memoria:chat.in", BODY, forged))


def test_rotation_secrets_come_from_the_settings(tmp_path: Path) -> None:
    settings = Settings.load(
        data_dir=tmp_path,
        bus_secret=SecretStr("new"),
        bus_secret_previous=SecretStr("old"),
        _env_file=None,
    )
    signer = signer_for(settings.bus)
    assert signer.fingerprint == Signer("new").fingerprint
    assert signer.previous_fingerprint == Signer("old").fingerprint
    assert signer.next_fingerprint is None


async def test_a_rotation_moves_the_recorded_key_without_a_stop(redis: Redis) -> None:
    async def recorded() -> str:
        value = await redis.get(KEY_ID_KEY)
        return value.decode() if isinstance(value, bytes) else str(value)

    old, new = Signer("old"), Signer("new")
    await ensure_shared_key(redis, old)  # the services as they run today
    # Step 1: one by one, every service also accepts the new secret; nothing moves yet.
    await ensure_shared_key(redis, Signer("old", next_secret="new"))
    assert await recorded() == old.fingerprint
    # Step 2: one by one, they sign with the new one and still accept the old one. The
    # first to start records the new key...
    await ensure_shared_key(redis, Signer("new", previous_secret="old"))
    assert await recorded() == new.fingerprint
    await ensure_shared_key(redis, Signer("new", previous_secret="old"))
    # ...a step-1 service restarted now still starts (it accepts the new key) and does not
    # move the record back; one that knows only the old key would refuse what is written
    # now, so it does not start.
    await ensure_shared_key(redis, Signer("old", next_secret="new"))
    assert await recorded() == new.fingerprint
    with pytest.raises(SharedKeyMismatch, match="MEMORIA_BUS_SECRET_NEXT"):
        await ensure_shared_key(redis, old)
    # Step 3: the old secret is dropped everywhere.
    await ensure_shared_key(redis, new)
    with pytest.raises(SharedKeyMismatch):
        await ensure_shared_key(redis, Signer("another", previous_secret="old"))
