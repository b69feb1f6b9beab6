"""The embedded broker (core/broker.py): a message file that cannot be decoded is set aside and
the consumer goes on; messages are written atomically, so a consumer never takes half of one.
On kombu's own filesystem transport the planted file below stops the consumer with
JSONDecodeError, which is what stopped the embedded worker (and with it `make run`)."""

import json
import logging
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest
from django.conf import settings
from kombu import Connection

from benchmark.tasks import worker_health
from core.processes import celery_worker_argv

TRUNCATED = b'{"body": "eyJ0YXNrIjogImJlbmNobWFyay53b3JrZXJfaGVhbHRoIi'  # cut mid-message


def _queue_name() -> str:
    # kombu keeps the filesystem transport's exchanges and bindings in one process-wide state,
    # so each test gets queue names of its own.
    return f"jobs-{uuid.uuid4().hex[:8]}"


def _folders(root):
    folders = {name: root / name for name in ("queue", "processed", "broken")}
    for folder in folders.values():
        folder.mkdir()
    return folders


def _connection(folders, transport="core.broker:Transport"):
    return Connection(
        "filesystem://",
        transport=transport,
        transport_options={
            "data_folder_in": str(folders["queue"]),
            "data_folder_out": str(folders["queue"]),
            "processed_folder": str(folders["processed"]),
            "broken_folder": str(folders["broken"]),
            "control_folder": str(folders["processed"]),
        },
    )


def _plant(queue_folder, queue: str, content: bytes = TRUNCATED) -> str:
    # kombu's naming; a time of 0 sorts it before every message written since.
    name = f"0_{uuid.uuid4()}.{queue}.msg"
    (queue_folder / name).write_bytes(content)
    return name


@pytest.mark.parametrize(
    "content",
    [TRUNCATED, b"", b"\xff\xfe not text", b"[1, 2]"],
    ids=["cut", "empty", "bytes", "list"],
)
def test_an_undecodable_message_is_set_aside_and_the_next_one_delivered(tmp_path, caplog, content):
    folders = _folders(tmp_path)
    with _connection(folders) as connection:
        name = _queue_name()
        queue = connection.SimpleQueue(name)
        queue.put({"job": 1})
        planted = _plant(folders["queue"], name, content)
        with caplog.at_level(logging.ERROR, logger="core.broker"):
            message = queue.get(timeout=2)
        assert message.payload == {"job": 1}
        message.ack()
        queue.close()
    assert (folders["broken"] / planted).read_bytes() == content  # kept, not deleted
    assert not list(folders["queue"].iterdir())
    assert planted in caplog.text and "could not be decoded" in caplog.text


def test_kombus_own_transport_fails_on_the_same_file(tmp_path):
    """What the transport above replaces: the consumer itself raises."""
    folders = _folders(tmp_path)
    with _connection(folders, transport="filesystem") as connection:
        name = _queue_name()
        queue = connection.SimpleQueue(name)
        _plant(folders["queue"], name)
        with pytest.raises(json.JSONDecodeError):
            queue.get(timeout=2)
        queue.close()


def test_a_message_is_written_whole_or_not_at_all(tmp_path):
    folders = _folders(tmp_path)
    # A message still being written lies under a name no consumer takes.
    name = _queue_name()
    partial = folders["queue"] / f".0_{uuid.uuid4()}.{name}.msg.part"
    partial.write_bytes(TRUNCATED)
    with _connection(folders) as connection:
        queue = connection.SimpleQueue(name)
        for job in range(20):
            queue.put({"job": job})
        assert queue.qsize() == 20  # the partial file is not counted either
        taken = [queue.get(timeout=2) for _ in range(20)]
        # Within one millisecond the order is the uuid's, as in kombu: a set, not a list.
        assert sorted(m.payload["job"] for m in taken) == list(range(20))
        for message in taken:
            message.ack()
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        queue.close()
    assert sorted(p.name for p in folders["queue"].iterdir()) == [partial.name]
    assert not list(folders["broken"].iterdir())


@pytest.mark.slow
def test_a_real_worker_survives_a_truncated_message_and_runs_the_next_task(tmp_path):
    """The embedded worker (filesystem broker, whatever this test run's broker is: REDIS_URL is
    removed from its environment and it gets a folder of its own) meets a truncated message
    ahead of a real task: it logs and sets the file aside, stays up, and runs the task."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["PROACTWEB_VAR_DIR"] = str(tmp_path)
    broker = tmp_path / "celery-broker"
    queue_name = f"test-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [
            *celery_worker_argv(),
            "--pool=solo",
            "-Q",
            queue_name,
            "-n",
            f"{queue_name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=INFO",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(worker.stdout), daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while "ready." not in "".join(lines):
            assert worker.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.2)
        planted = _plant(broker / "queue", queue_name)
        folders = {
            "queue": broker / "queue",
            "processed": broker / "processed",
            "broken": broker / "broken",
        }
        with _connection(folders) as connection:
            result = worker_health.apply_async(queue=queue_name, connection=connection)
        deadline = time.monotonic() + 60
        while f"{result.id}] succeeded" not in "".join(lines):
            assert worker.poll() is None, "the worker exited:\n" + "".join(lines)
            assert time.monotonic() < deadline, "the task did not run:\n" + "".join(lines)
            time.sleep(0.2)
        assert f"message file {planted}" in "".join(lines)
        assert (broker / "broken" / planted).read_bytes() == TRUNCATED
        assert worker.poll() is None
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
