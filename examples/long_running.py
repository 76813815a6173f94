"""Long-running plans: a person approves a step, the process restarts in between, a loop
refines a draft, and a stream shows each result as it lands.

    python3 tasks.py run examples/long_running.py

1. A graph drafts an email and asks a person (``ctx.interrupt``): the run pauses with status
   ``interrupted`` and its checkpoint in ``approvals.sqlite``.
2. A *new* runtime (as after a restart) resumes the checkpoint with the person's answer; the
   draft is not written again, only the approval and the send run.
3. A state-machine loop shortens the draft until it fits, one graph per iteration.
4. A stream of the first graph prints each task as it finishes, and the picture of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from ditto import Ditto, NodeContext, RunEnd, TaskDone, create_ditto, define_worker, graph, loop
from ditto.adapters.sqlite import SqliteCheckpointStore

CHECKPOINTS = Path("approvals.sqlite")


async def draft(request: dict[str, Any], ctx: NodeContext) -> dict[str, str]:
    return {"text": f"Dear {request['to']}, the report is attached and ready for review."}


async def approve(request: dict[str, Any], ctx: NodeContext) -> dict[str, bool]:
    answer = ctx.interrupt({"question": "Send this email?", "text": request["text"]})
    return {"approved": answer == "yes"}


async def send(request: dict[str, Any], ctx: NodeContext) -> dict[str, str]:
    return {"sent": request["text"] if request["approved"] else ""}


async def shorten(request: dict[str, Any], ctx: NodeContext) -> dict[str, str]:
    words = request["text"].split()
    return {"text": " ".join(words[:-1])}


mail = define_worker(
    "mail",
    {"MAIL.DRAFT": draft, "MAIL.APPROVE": approve, "MAIL.SEND": send, "MAIL.SHORTEN": shorten},
)

email = (
    graph("email")
    .node("draft", "MAIL.DRAFT", [], lambda request, deps: request)
    .node("approve", "MAIL.APPROVE", ["draft"], lambda _, deps: deps["draft"].unwrap())
    .node(
        "send",
        "MAIL.SEND",
        ["draft", "approve"],
        lambda _, deps: {**deps["draft"].unwrap(), **deps["approve"].unwrap()},
    )
)

shorter = graph("shorten").node("cut", "MAIL.SHORTEN", [], lambda text, deps: {"text": text})


def runtime() -> Ditto:
    return create_ditto(workers=[mail], checkpoints=SqliteCheckpointStore(CHECKPOINTS))


async def main() -> None:
    async with runtime() as first:
        paused = await first.run(email, {"to": "Ann"}, checkpoint="email-ann")
        print(paused.status, "->", paused.interrupts[0].payload["question"])

    async with runtime() as second:  # a new process would do exactly this
        done = await second.resume("email-ann", "yes", plan=email)
        print(done.status, "->", done["send"].unwrap()["sent"])

        fitted = await second.loop(
            loop(
                graph=shorter,
                update=lambda text, run: run["cut"].unwrap()["text"],
                done=lambda text, run: len(text) <= 40,
            ),
            done["send"].unwrap()["sent"],
            on_event=lambda event: print(f"  loop iteration {event.iteration}: {event.status}"),
        )
        print("fitted ->", fitted)

        async with second.stream(email, {"to": "Bo"}) as events:
            async for event in events:
                if isinstance(event, TaskDone):
                    print(f"  {event.task_id}: {event.result.status}")
                elif isinstance(event, RunEnd):
                    print(event.result.to_mermaid())


def remove_checkpoints() -> None:
    for path in (CHECKPOINTS, *CHECKPOINTS.parent.glob(f"{CHECKPOINTS.name}-*")):
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    remove_checkpoints()
    anyio.run(main)
    remove_checkpoints()
