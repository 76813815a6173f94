"""``runtime.stream(...)``: a run's results as they happen, through a bounded buffer.

The run executes in a task of its own and hands each event to the consumer through an anyio
memory stream of ``buffer`` slots. When the slots are full, the task that just finished waits
(before its dependents start), so a slow consumer slows the run down and memory stays bounded.
Leaving the ``async with`` block cancels a run that is still going.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ditto.contracts.result import NodeResult
from ditto.errors import ErrorCode, InvalidInputError
from ditto.graph.builder import Graph
from ditto.runtime.loop_runner import LoopServices, check_loop, run_loop
from ditto.runtime.loops import LoopEvent, PlanLoop, StateLoop
from ditto.runtime.runs import checked_wait, stored_result

if TYPE_CHECKING:
    from ditto.graph.plan import Plan
    from ditto.runtime.checkpoints.graphs import GraphCheckpoint
    from ditto.runtime.loops import LoopDefinition
    from ditto.runtime.results import RunResult
    from ditto.runtime.runs import ResultObserver, RunRequest

__all__ = (
    "RunEnd",
    "RunStream",
    "StreamEvent",
    "StreamServices",
    "TaskDone",
    "TaskInterrupted",
)


@dataclass(frozen=True, slots=True)
class TaskDone:
    """A task of the streamed graph finished (any status)."""

    task_id: str
    result: NodeResult[Any]


@dataclass(frozen=True, slots=True)
class TaskInterrupted:
    """A task of the streamed graph asks a person (it raised :class:`~ditto.errors.Interrupt`):
    it did not fail, it waits; the run ends ``interrupted`` and ``resume`` answers it."""

    task_id: str
    payload: Any
    """What the handler asked (the ``Interrupt`` payload)."""


@dataclass(frozen=True, slots=True)
class RunEnd:
    """The last event: the run's :class:`~ditto.runtime.results.RunResult`, or a loop's final
    value."""

    result: Any


StreamEvent = TaskDone | TaskInterrupted | LoopEvent | RunEnd


class StreamServices(LoopServices, Protocol):
    """What a stream needs from the runtime: a loop's services, and a graph run in three
    steps (checked request, opened checkpoint, execution watched by an observer)."""

    def request(
        self,
        plan: Graph | Plan,
        run_input: Any,
        concurrency: int | None,
        timeout: float | None,
        principal: str | None,
    ) -> RunRequest: ...

    async def open_checkpoint(
        self, request: RunRequest, checkpoint_id: str, wait: float | None = None
    ) -> GraphCheckpoint: ...

    async def execute(
        self, request: RunRequest, observe: ResultObserver | None = None
    ) -> RunResult: ...


class RunStream:
    """What :meth:`Ditto.stream` returns: enter it to start the run, iterate to watch it.

    Iteration yields :class:`TaskDone` for each task of a graph in completion order
    (:class:`TaskInterrupted` for a task that asks a person), for a loop :class:`LoopEvent` for
    each graph starting and ending, then one :class:`RunEnd`. If the run
    raises (a binder, a loop limit), iteration raises that exception after the events that came
    before it.
    """

    def __init__(
        self,
        runtime: StreamServices,
        plan: Graph | LoopDefinition,
        run_input: Any,
        buffer: int,
        options: dict[str, Any],
    ) -> None:
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise InvalidInputError("buffer must be a positive integer")
        if not isinstance(plan, Graph | StateLoop | PlanLoop):
            raise InvalidInputError("stream() takes a graph or a loop definition")
        self._runtime = runtime
        self._plan = plan
        self._input = run_input
        self._buffer = buffer
        self._options = options
        self._task: asyncio.Task[None] | None = None
        self._send: MemoryObjectSendStream[StreamEvent | BaseException] | None = None
        self._receive: MemoryObjectReceiveStream[StreamEvent | BaseException] | None = None
        self._opened: GraphCheckpoint | None = None
        """The checkpoint whose lease this stream's run holds (given up by the run, and again
        here in case the run never started)."""

    async def __aenter__(self) -> AsyncIterator[StreamEvent]:
        # Everything is checked before the stream exists, so a bad argument raises from
        # `async with` and leaves nothing open.
        produce = await self._producer()
        send, receive = anyio.create_memory_object_stream[StreamEvent | BaseException](self._buffer)
        self._send = send
        self._receive = receive
        self._task = asyncio.create_task(_pump(produce, send))
        return _events(receive)

    async def _producer(self) -> Callable[[], Awaitable[Any]]:
        """What runs the plan, sending its events; raises for invalid arguments."""
        runtime = self._runtime
        plan = self._plan
        options = dict(self._options)
        if isinstance(plan, Graph):
            unknown = options.keys() - {"concurrency", "timeout", "principal", "checkpoint", "wait"}
            if unknown:
                raise InvalidInputError(f"stream() has no option {sorted(unknown)[0]!r}")
            request = runtime.request(
                plan,
                self._input,
                options.get("concurrency"),
                options.get("timeout"),
                options.get("principal"),
            )
            checkpoint = options.get("checkpoint")
            if checkpoint is not None:
                request.checkpoint = self._opened = await runtime.open_checkpoint(
                    request, checkpoint, checked_wait(options.get("wait"))
                )

            async def observe(task_id: str, result: NodeResult[Any]) -> None:
                error = result.error
                if error is not None and error.code == ErrorCode.INTERRUPTED:
                    payload = error.details.get("payload") if error.details else None
                    await self._deliver(TaskInterrupted(task_id, payload))
                else:
                    await self._deliver(TaskDone(task_id, result))

            async def run_graph() -> Any:
                stored = request.checkpoint
                if stored is not None and stored.status == "completed":
                    result = stored_result(request.plan, stored)
                    for task_id, task_result in result.items():
                        await observe(task_id, task_result)
                    return result
                return await runtime.execute(request, observe)

            return run_graph

        unknown = options.keys() - {
            "concurrency",
            "timeout",
            "principal",
            "checkpoint",
            "on_event",
            "wait",
        }
        if unknown:
            raise InvalidInputError(f"stream() has no option {sorted(unknown)[0]!r}")
        checked = check_loop(
            runtime,
            plan,
            concurrency=options.get("concurrency"),
            timeout=options.get("timeout"),
            principal=options.get("principal"),
            checkpoint=options.get("checkpoint"),
            wait=options.get("wait"),
        )
        observer = options.get("on_event")

        async def on_event(event: LoopEvent) -> None:
            if observer is not None:
                outcome = observer(event)
                if inspect.isawaitable(outcome):
                    await outcome
            await self._deliver(event)

        async def run() -> Any:
            return await run_loop(runtime, plan, self._input, checked, on_event)

        return run

    async def _deliver(self, event: StreamEvent) -> None:
        assert self._send is not None
        await self._send.send(event)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task = self._task
        if task is not None:
            if not task.done():
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
        if self._opened is not None:
            await self._opened.release()
        # The pump closes the send end when it ran; a task cancelled before it started did not.
        if self._send is not None:
            self._send.close()
        if self._receive is not None:
            self._receive.close()


async def _pump(
    produce: Callable[[], Awaitable[Any]], send: MemoryObjectSendStream[StreamEvent | BaseException]
) -> None:
    """Run the producer; send its end (or its exception) last, then close the stream."""
    async with send:
        try:
            result = await produce()
        except Exception as exc:
            await send.send(exc)
            return
        await send.send(RunEnd(result))


async def _events(
    receive: MemoryObjectReceiveStream[StreamEvent | BaseException],
) -> AsyncIterator[StreamEvent]:
    async for event in receive:
        if isinstance(event, BaseException):
            raise event
        yield event
        if isinstance(event, RunEnd):
            return
