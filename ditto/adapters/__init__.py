"""Driver-backed implementations of the runtime's ports: :mod:`ditto.adapters.sqlite`
(checkpoints, and the writer thread with group commit that the SQLite memory store shares) and
:mod:`ditto.adapters.redis` (checkpoints, the Redis Streams transport and its worker server).
The runtime never imports them; an application picks one and hands it to the runtime."""
