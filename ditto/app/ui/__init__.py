"""``ditto ui``: a memory browser over the runtime and stores the CLI uses.

Every record read and change is a MEMORY node invocation (access control, audit and usage apply
as to any caller); history, the audit log and retention are read from the store itself, as the
CLI's administrative commands do. Pages are rendered on the server (Jinja2, autoescaped: stored
text is untrusted) with a little JavaScript from ``static/`` for the keyboard. See
:mod:`ditto.app.ui.security` for the token, CSRF and header rules.
"""

from ditto.app.ui.app import create_app
from ditto.app.ui.backend import UiOptions

__all__ = ("UiOptions", "create_app")
