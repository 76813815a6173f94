"""The ``ditto`` command line (typer + rich). Thin: it parses arguments and renders results."""
