"""The `workingmem` command: thin commands over the library.

    $ workingmem demo                          # store a conversation, show what the model gets
    $ workingmem serve --upstream http://127.0.0.1:8000/v1   # the memory gateway on :8080
    $ workingmem keys create --tenant acme     # an API key; serve then needs one per request
    $ workingmem threads show th1 --tenant acme

Needs the ``server`` extra (typer, rich, FastAPI, uvicorn). Every command's help has an example.
"""

from __future__ import annotations

from ._app import app  # first: without the server extra, it says how to install it

# isort: split
from . import _demo, _serve  # noqa: F401 - their commands register on `app` when imported
from ._keys import keys_app
from ._threads import threads_app

__all__ = ["app", "main"]

app.add_typer(keys_app, name="keys")
app.add_typer(threads_app, name="threads")


def main() -> None:
    """Entry point of the `workingmem` command."""
    app()
