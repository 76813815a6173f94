"""The MEMORY write policy: pure stages the worker runs before a write reaches the store."""
