"""The one writer thread with group commit that every SQLite store of the project uses (the
memory store and the checkpoint store).

sqlite3 blocks and SQLite admits one writer at a time, so each store funnels its writes through
one thread that owns its write connection. A writer thread here:

* runs **jobs** in groups: every job queued while it was busy is handed to the store's
  ``commit(group)`` at once, so a hundred writes arriving together cost one transaction and a
  lone write costs one. What a group means (one transaction, savepoints, how each caller gets
  its own outcome) is the store's policy, passed in as ``commit``;
* runs **calls** (:meth:`WriterThread.submit`, shaped like ``Executor.submit``) alone, in queue
  order, for work that needs the writer's connection outside any group (opening the file,
  migrating the schema);
* never dies of a store's bug: a ``commit`` that raises is logged, and the thread goes on;
* never outlives its store: :meth:`WriterThread.stop` (or ``shutdown``, shaped like
  ``Executor.shutdown``) lets it finish what is queued, run the store's ``on_exit`` (close the
  connection) on the thread, and end. It is a daemon thread and
  holds no reference to the store, so a store nobody closed can still be garbage collected
  (and stop its thread then) and never keeps the interpreter alive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any, Generic, TypeVar

__all__ = ("WriterThread",)

logger = logging.getLogger("ditto.adapters.sqlite")

J = TypeVar("J")
T = TypeVar("T")

_JOB = 0
_CALL = 1
_STOP = (2, None, None)


class WriterThread(Generic[J]):
    """A store's writer thread (see the module docstring).

    Args:
        name: The thread's name (shown in stack dumps and by the stall watchdog).
        commit: Called on the thread with every job queued while it was busy, in queue order;
            it settles each job's caller itself and should not raise.
        on_exit: Called on the thread after the last job, e.g. to close the connection.
    """

    def __init__(
        self,
        name: str,
        commit: Callable[[list[J]], None],
        *,
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self._commit = commit
        self._on_exit = on_exit
        self._queue: SimpleQueue[tuple[int, Any, Any]] = SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def put(self, job: J) -> None:
        """Queue ``job`` for the next group (returns at once)."""
        self._queue.put((_JOB, job, None))

    def submit(self, function: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run ``function(*args)`` on the thread, alone and after everything queued before it.

        Returns:
            Its future; cancelling it before the thread got to it means it never runs.
        """
        future: Future[T] = Future()
        self._queue.put((_CALL, partial(function, *args), future))
        return future

    def stop(self) -> None:
        """Let the thread finish what is queued, run ``on_exit`` and end (returns at once;
        :attr:`thread` can be joined)."""
        self._queue.put(_STOP)

    def shutdown(self, wait: bool = True) -> None:
        """:meth:`stop`, then wait for the thread to end when ``wait`` (blocks: call it off
        the event loop)."""
        self.stop()
        if wait:
            self.thread.join()

    def _run(self) -> None:
        queue = self._queue
        try:
            while True:
                item = queue.get()
                group: list[J] = []
                while item[0] == _JOB:
                    group.append(item[1])
                    try:
                        item = queue.get_nowait()
                    except Empty:
                        item = (_JOB, None, None)  # nothing after the group: wait again
                        break
                if group:
                    self._commit_logged(group)
                if item is _STOP:
                    return
                if item[0] == _CALL:
                    _run_call(item[1], item[2])
        finally:
            if self._on_exit is not None:
                self._on_exit()

    def _commit_logged(self, group: list[J]) -> None:
        try:
            self._commit(group)
        except BaseException:  # the store settles its callers; a bug must not end the thread
            logger.exception("a SQLite store's group commit raised")


def _run_call(function: Callable[[], Any], future: Future[Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = function()
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(result)
