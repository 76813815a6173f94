"""``graph().node(..., retry=...)``: the policy travels on the task, is checked when the graph is
built, and is not part of the plan digest (how a task runs, not which task it is)."""

from __future__ import annotations

import pytest

from ditto import GraphError, RetryPolicy, graph
from ditto.runtime.checkpoints.graphs import plan_digest

POLICY = RetryPolicy(max_attempts=5, initial=0.1)


def test_a_tasks_policy_is_kept_on_the_task() -> None:
    plan = (
        graph("g")
        .node("a", "W.RUN", [], lambda i, d: i, retry=POLICY)
        .node("b", "W.RUN", ["a"], lambda i, d: i)
    )
    first, second = plan.tasks
    assert first.retry == POLICY
    assert second.retry is None


@pytest.mark.parametrize("bad", [3, "RetryPolicy()", {"max_attempts": 3}])
def test_a_retry_that_is_not_a_policy_is_refused_naming_the_task(bad: object) -> None:
    with pytest.raises(GraphError, match="task 'a': retry must be a RetryPolicy"):
        graph("g").node("a", "W.RUN", [], lambda i, d: i, retry=bad)  # type: ignore[arg-type]


def test_the_plan_digest_does_not_change_with_the_policy_alone() -> None:
    def shaped(retry: RetryPolicy | None) -> str:
        built = graph("g").node("a", "W.RUN", [], lambda i, d: i, retry=retry)
        return plan_digest(built.compile())

    assert shaped(None) == shaped(POLICY) == shaped(RetryPolicy(max_attempts=2))
