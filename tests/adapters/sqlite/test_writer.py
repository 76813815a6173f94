"""The one SQLite writer thread: jobs queued while it is busy reach the store's commit as one
group, calls run alone in queue order, a failing commit does not end the thread, and stopping
finishes the queue and runs the store's exit on the thread."""

from __future__ import annotations

import threading

import pytest

from ditto.adapters.sqlite.writer import WriterThread


def test_jobs_queued_while_busy_commit_as_one_group_and_calls_run_in_order() -> None:
    busy, release = threading.Event(), threading.Event()
    groups: list[list[int]] = []
    order: list[str] = []

    def commit(group: list[int]) -> None:
        if group == [0]:
            busy.set()
            release.wait(10)
        groups.append(group)
        order.append(f"group {group}")

    writer: WriterThread[int] = WriterThread("test-writer", commit)
    writer.put(0)
    assert busy.wait(10)
    for job in (1, 2, 3):
        writer.put(job)
    called = writer.submit(order.append, "call")
    writer.put(4)
    release.set()
    assert called.result(10) is None
    writer.shutdown()
    assert groups == [[0], [1, 2, 3], [4]]
    assert order == ["group [0]", "group [1, 2, 3]", "call", "group [4]"]


def test_a_failing_commit_does_not_end_the_thread(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []

    def commit(group: list[int]) -> None:
        seen.extend(group)
        if 1 in group:
            raise RuntimeError("a bug in a store's commit")

    writer: WriterThread[int] = WriterThread("test-writer", commit)
    writer.put(1)
    writer.submit(lambda: None).result(10)  # after the failing group
    writer.put(2)
    writer.shutdown()
    assert seen == [1, 2]
    assert "group commit raised" in caplog.text


def test_stopping_finishes_the_queue_then_runs_the_exit_on_the_thread() -> None:
    done: list[int] = []
    exits: list[str] = []
    writer: WriterThread[int] = WriterThread(
        "test-writer", done.extend, on_exit=lambda: exits.append(threading.current_thread().name)
    )
    for job in range(5):
        writer.put(job)
    writer.shutdown()
    assert done == [0, 1, 2, 3, 4]
    assert exits == ["test-writer"]
    assert not writer.thread.is_alive()


def test_a_call_cancelled_before_it_ran_never_runs() -> None:
    busy, release = threading.Event(), threading.Event()
    ran: list[str] = []
    writer: WriterThread[int] = WriterThread("test-writer", lambda group: None)
    writer.submit(lambda: (busy.set(), release.wait(10)))
    assert busy.wait(10)
    later = writer.submit(ran.append, "late")
    assert later.cancel()
    release.set()
    writer.shutdown()
    assert ran == []
