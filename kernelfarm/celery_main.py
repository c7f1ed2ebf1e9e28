"""``python -P -m kernelfarm.celery_main -A <app module> worker ...``: Celery's own command line, with the
app module imported first.

Celery imports the ``-A`` module with the working directory put first on ``sys.path``
(``celery.utils.imports.import_from_cwd``), whatever ``-P`` said. Run from a folder that holds its own
``kernelfarm/`` (a clone of this repository, say), the coordinator and the workers would load that copy
instead of the installed package. Imported here first, with the working directory off ``sys.path``, the
app module is already in ``sys.modules`` when Celery asks for it.

The farm's long-running subcommands (``worker``, ``beat``) start without ``click_repl``: Celery's command
line imports it for the ``celery amqp repl`` shell alone, and it brings prompt_toolkit, ~50 ms of the
~1.1 s between a replay worker's exec and its registration on a 2-core VM, paid again by every
replacement of a killed worker. A stand-in whose ``register_repl`` adds nothing takes its place; every
other subcommand gets the real one.
"""

from __future__ import annotations

import importlib
import sys
import types

from celery.__main__ import main as celery_main

# Celery subcommands run as the farm's components: none of them opens a REPL.
COMPONENT_COMMANDS = ("worker", "beat")


def _without_repl() -> None:
    """Stand in for ``click_repl`` (see the module's docstring), unless it is already loaded."""
    if "click_repl" in sys.modules:
        return
    stand_in = types.ModuleType("click_repl", "kernelfarm's stand-in: component processes open no REPL")
    stand_in.register_repl = lambda group, name="repl": None  # type: ignore[attr-defined]
    sys.modules["click_repl"] = stand_in


def main() -> None:
    at = sys.argv.index("-A")
    app = sys.argv[at + 1]
    subcommand = sys.argv[at + 2] if len(sys.argv) > at + 2 else None
    if subcommand in COMPONENT_COMMANDS:
        _without_repl()
    importlib.import_module(app.partition(":")[0])
    celery_main()


if __name__ == "__main__":
    main()
