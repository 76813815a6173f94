"""``python -m ditto`` runs the ``ditto`` command."""

from ditto.app.cli.app import main

main()
