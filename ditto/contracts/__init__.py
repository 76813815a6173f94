"""Wire types shared by the runtime and the workers."""

from ditto.contracts.node_types import (
    NODE_TYPE_PATTERN,
    NodeContract,
    NodeTypeRegistry,
    is_node_type,
)
from ditto.contracts.result import AttemptInfo, NodeResult, NodeStatus
from ditto.contracts.retry import RetryPolicy

__all__ = (
    "NODE_TYPE_PATTERN",
    "AttemptInfo",
    "NodeContract",
    "NodeResult",
    "NodeStatus",
    "NodeTypeRegistry",
    "RetryPolicy",
    "is_node_type",
)
