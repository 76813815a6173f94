"""``python -m ditto`` runs the ``ditto`` command."""

from ditto.cli.app import main

main()
