"""The MEMORY write policy: pure stages a write passes before it reaches the store.

Each stage is a library with no I/O, so the worker (and the benchmarks) call it directly:
:mod:`~workers.memory.policy.safety` finds secrets, personal data and prompt injections and
redacts them (its patterns and thresholds are data in
:mod:`~workers.memory.policy.safety_rules`); :mod:`~workers.memory.policy.similarity` finds
exact and near duplicates (normalised hashes, MinHash signatures with LSH candidates, whose
arrays in :mod:`~workers.memory.policy.minhash` and :mod:`~workers.memory.policy.lsh` are
numpy's), and :mod:`~workers.memory.policy.contradiction` says whether a new text contradicts
an older one, and why. :mod:`~workers.memory.policy.config` holds what the worker's policy
does where. Import the modules themselves: this package re-exports nothing, so importing one
stage never loads another.
"""
