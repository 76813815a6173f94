"""Long-running processes the ``ditto`` command starts: remote workers (``ditto worker serve``)."""
