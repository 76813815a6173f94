"""Worker implementations (MEMORY, CONTEXT). They import ``ditto``; ``ditto`` never imports them,
except ``ditto.app.bootstrap``, which wires configured workers into a runtime."""
