"""A plan drawn as a picture the page can show without a script: tasks in columns by depth
(each after its deepest dependency, as the mermaid and dot pictures order them), edges from
dependency to dependent, each task coloured by its status in the run (the statuses of
:func:`ditto.graph.pictures.run_status`). The template renders the boxes and lines; this
module only places them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("Box", "Drawing", "Line", "layout")

WIDTH = 220
HEIGHT = 44
GAP_X = 60
GAP_Y = 18
MARGIN = 12
_LABEL = 30


@dataclass(frozen=True)
class Box:
    id: str
    label: str
    node_type: str
    status: str
    x: int
    y: int


@dataclass(frozen=True)
class Line:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    boxes: list[Box]
    lines: list[Line]
    box_width: int = WIDTH
    box_height: int = HEIGHT


def _cut(text: str) -> str:
    return text if len(text) <= _LABEL else text[: _LABEL - 1] + "…"


def layout(tasks: Sequence[Any], statuses: Mapping[str, str]) -> Drawing:
    """Place ``tasks`` (in declaration order: every dependency comes first) and their edges."""
    depth: dict[str, int] = {}
    for task in tasks:
        depth[task.id] = 1 + max((depth[dep] for dep in task.deps), default=-1)
    rows: dict[int, int] = {}
    where: dict[str, tuple[int, int]] = {}
    boxes = []
    for task in tasks:
        column = depth[task.id]
        row = rows.get(column, 0)
        rows[column] = row + 1
        x = MARGIN + column * (WIDTH + GAP_X)
        y = MARGIN + row * (HEIGHT + GAP_Y)
        where[task.id] = (x, y)
        status = statuses.get(task.id, "not_run")
        boxes.append(Box(task.id, _cut(task.id), _cut(task.node_type), status, x, y))
    lines = [
        Line(
            where[dep][0] + WIDTH,
            where[dep][1] + HEIGHT // 2,
            where[task.id][0],
            where[task.id][1] + HEIGHT // 2,
        )
        for task in tasks
        for dep in task.deps
    ]
    columns = 1 + max(depth.values(), default=0)
    tallest = max(rows.values(), default=1)
    return Drawing(
        width=2 * MARGIN + columns * WIDTH + (columns - 1) * GAP_X,
        height=2 * MARGIN + tallest * HEIGHT + (tallest - 1) * GAP_Y,
        boxes=boxes,
        lines=lines,
    )
