"""What retry policies cost on the hot path: the runtime of this tree against a baseline tree
(default: ``git archive HEAD``, the code before the change under test), measured in the same run.

Each round runs one child process per tree, alternating which goes first; a child measures a
chain of 1,000 no-op graph tasks (``runtime.run``) and 20,000 single ``invoke`` calls with no
retry policy anywhere, in µs per node. This tree's child also measures the same work under a
``RetryPolicy`` that never has to retry (every call succeeds): the price of declaring a policy.
A child reports its fastest repeat (other processes only add time); the table prints medians
of those over the rounds, the ratios ``this tree / baseline`` (with no policy: 1.00 within
noise) and, to read them against, every round's own ratio.

A fair baseline is this working tree without the change under test (``--base DIR``); ``HEAD``
also holds back every other uncommitted change.

Run it with ``.venv/bin/python bench/retry_overhead.py [--base DIR] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from time import perf_counter
from typing import Any

HERE = Path(__file__).resolve().parent.parent
CHAIN = 1_000
CALLS = 20_000
REPEATS = 7


async def _measure(with_policy: bool) -> dict[str, float]:
    from ditto import create_ditto, define_worker, graph

    policy: Any = None
    if with_policy:
        from ditto import RetryPolicy

        policy = RetryPolicy(max_attempts=3, initial=0.01)

    async def noop(value: Any, ctx: Any) -> Any:
        return None

    plan = graph("chain")
    for n in range(CHAIN):
        deps = [f"n{n - 1}"] if n else []
        if policy is None:
            plan = plan.node(f"n{n}", "NOOP.RUN", deps, lambda i, d: None)
        else:
            plan = plan.node(f"n{n}", "NOOP.RUN", deps, lambda i, d: None, retry=policy)
    plan.compile()
    figures: dict[str, list[float]] = {"chain": [], "invoke": []}
    async with create_ditto(workers=[define_worker("noop", {"NOOP.RUN": noop})]) as runtime:
        invoke = runtime.invoke
        options: dict[str, Any] = {} if policy is None else {"retry": policy}
        for repeat in range(REPEATS + 1):
            started = perf_counter()
            run = await runtime.run(plan, None)
            chain_us = (perf_counter() - started) * 1e6 / CHAIN
            assert run.ok
            started = perf_counter()
            for _ in range(CALLS):
                await invoke("NOOP.RUN", None, **options)
            invoke_us = (perf_counter() - started) * 1e6 / CALLS
            if repeat:  # the first is the warm-up
                figures["chain"].append(chain_us)
                figures["invoke"].append(invoke_us)
    # The fastest repeat: other processes on the machine only ever add time.
    return {name: min(values) for name, values in figures.items()}


def _child(with_policy: bool) -> None:
    print(json.dumps(asyncio.run(_measure(with_policy))))


def _run_child(tree: Path, with_policy: bool) -> dict[str, float]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child"]
    if with_policy:
        command.append("--policy")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # cwd and PYTHONPATH put ``tree`` before the editable install of this checkout.
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _baseline(given: str | None, scratch: Path) -> Path:
    if given is not None:
        return Path(given).resolve()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=HERE, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive.stdout, check=True)
    return scratch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the baseline source tree (default: git archive HEAD)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--policy", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        _child(options.policy)
        return
    with tempfile.TemporaryDirectory(prefix="ditto-retry-bench-") as scratch:
        base = _baseline(options.base, Path(scratch))
        rows: dict[str, list[dict[str, float]]] = {"base": [], "new": [], "policy": []}
        for round_ in range(options.rounds):
            order = [("base", base, False), ("new", HERE, False)]
            if round_ % 2:
                order.reverse()
            order.append(("policy", HERE, True))
            for name, tree, with_policy in order:
                rows[name].append(_run_child(tree, with_policy))
    print(f"{options.rounds} rounds, medians (µs per node), baseline: {base}")
    print(f"{'measure':<10}{'baseline':>10}{'no policy':>11}{'ratio':>8}{'policy':>9}{'ratio':>8}")
    for measure in ("chain", "invoke"):
        before, after, declared = (
            statistics.median(row[measure] for row in rows[name])
            for name in ("base", "new", "policy")
        )
        print(
            f"{measure:<10}{before:>10.2f}{after:>11.2f}{after / before:>8.2f}"
            f"{declared:>9.2f}{declared / before:>8.2f}"
        )
    print("per-round ratios, no policy / baseline (the noise to read the medians against):")
    for measure in ("chain", "invoke"):
        ratios = sorted(
            new[measure] / old[measure] for old, new in zip(rows["base"], rows["new"], strict=True)
        )
        print(f"  {measure:<8}" + " ".join(f"{ratio:.2f}" for ratio in ratios))


if __name__ == "__main__":
    main()
