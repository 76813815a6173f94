"""A child process for the checkpoint tests: runs, is killed, resumes, answers interrupts.

``python -m tests.reliability.checkpoint_child MODE --store KIND:WHERE ...`` prints one JSON line
with what it saw. Every side effect of a task is one line ``<task id>=<ctx.idempotency_key>``
appended to the ``--effects`` file with ``O_APPEND`` (it reaches the kernel before the handler
returns, so it survives a ``kill -9`` of this process); the parent counts them, by task and by
key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from typing import Any

from ditto import Ditto, DittoError, NodeContext, define_worker, graph
from ditto.graph import Graph
from ditto.runtime.checkpoints import CheckpointStore
from ditto.runtime.limits import RuntimeLimits

CHAINS = 10
"""The long run: ``CHAINS`` chains of ``LENGTH`` tasks each, 200 tasks in all."""
LENGTH = 20


def long_plan() -> Graph:
    plan = graph("long")
    for chain in range(CHAINS):
        for step in range(LENGTH):
            deps = [f"c{chain}-{step - 1}"] if step else []
            plan = plan.node(f"c{chain}-{step}", "SIDE.EFFECT", deps, _task_input(chain, step))
    return plan


def _task_input(chain: int, step: int) -> Any:
    return lambda run_input, deps: {"task": f"c{chain}-{step}"}


def approval_plan() -> Graph:
    return (
        graph("approval")
        .node("draft", "SIDE.EFFECT", [], lambda run_input, deps: {"task": "draft"})
        .node("approve", "SIDE.APPROVE", ["draft"], lambda run_input, deps: {"task": "approve"})
        .node(
            "send",
            "SIDE.EFFECT",
            ["approve"],
            lambda run_input, deps: {
                "task": "send" if deps["approve"].unwrap()["approved"] else "discard"
            },
        )
    )


def open_store(spec: str) -> CheckpointStore:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        from ditto.adapters.sqlite import SqliteCheckpointStore

        return SqliteCheckpointStore(where)
    if kind == "redis":
        from ditto.adapters.redis import RedisCheckpointStore

        url, _, prefix = where.rpartition("|")
        return RedisCheckpointStore.from_url(url, prefix=prefix)
    raise SystemExit(f"unknown store {kind!r}")


def build_runtime(args: argparse.Namespace) -> Ditto:
    effects = os.open(args.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    calls = 0

    async def side_effect(input: dict[str, str], ctx: NodeContext) -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls == args.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # before this task's effect
        await asyncio.sleep(args.sleep)
        os.write(effects, f"{input['task']}={ctx.idempotency_key}\n".encode())
        return {"done": input["task"]}

    async def approve(input: dict[str, str], ctx: NodeContext) -> dict[str, bool]:
        answer = ctx.interrupt({"question": "send the draft?"})
        os.write(effects, f"answered:{answer}={ctx.idempotency_key}\n".encode())
        return {"approved": answer == "approve"}

    worker = define_worker("side", {"SIDE.EFFECT": side_effect, "SIDE.APPROVE": approve})
    # A short lease: a resume after a kill waits (--wait) until the dead run's lease lapses.
    runtime = Ditto(
        RuntimeLimits(checkpoint_lease_ms=args.lease_ms), checkpoints=open_store(args.store)
    )
    runtime.register(worker)
    return runtime


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with build_runtime(args) as runtime:
        if args.mode == "long":
            result = await runtime.run(
                long_plan(), None, checkpoint=args.checkpoint, concurrency=args.concurrency
            )
            return {"status": result.status, "ok": result.ok, "tasks": len(result)}
        if args.mode == "resume-long":
            try:
                result = await runtime.resume(
                    args.checkpoint, plan=long_plan(), concurrency=args.concurrency, wait=args.wait
                )
            except DittoError as exc:
                return {"error": exc.code, "details": exc.details}
            return {"status": result.status, "ok": result.ok, "tasks": len(result)}
        if args.mode == "ask":
            result = await runtime.run(approval_plan(), {"to": "bob"}, checkpoint=args.checkpoint)
            return {
                "status": result.status,
                "checkpoint_id": result.checkpoint_id,
                "interrupts": [[i.task_id, i.payload] for i in result.interrupts],
            }
        if args.mode == "answer":
            result = await runtime.resume(args.checkpoint, args.answer, plan=approval_plan())
            return {
                "status": result.status,
                "ok": result.ok,
                "send": result["send"].unwrap(),
            }
    raise SystemExit(f"unknown mode {args.mode!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["long", "resume-long", "ask", "answer"])
    parser.add_argument("--store", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--kill-at", type=int, default=0)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--answer", default=None)
    parser.add_argument("--lease-ms", type=int, default=1000)
    parser.add_argument("--wait", type=float, default=0.0)
    print(json.dumps(asyncio.run(main(parser.parse_args()))), flush=True)
