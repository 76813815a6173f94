"""Wire types shared by the runtime and the workers."""

from ditto.contracts.node_types import (
    NODE_TYPE_PATTERN,
    NodeContract,
    NodeTypeRegistry,
    is_node_type,
)
from ditto.contracts.result import NodeResult, NodeStatus

__all__ = (
    "NODE_TYPE_PATTERN",
    "NodeContract",
    "NodeResult",
    "NodeStatus",
    "NodeTypeRegistry",
    "is_node_type",
)
