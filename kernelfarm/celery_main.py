"""``python -P -m kernelfarm.celery_main -A <app module> worker ...``: Celery's own command line, with the
app module imported first.

Celery imports the ``-A`` module with the working directory put first on ``sys.path``
(``celery.utils.imports.import_from_cwd``), whatever ``-P`` said. Run from a folder that holds its own
``kernelfarm/`` (a clone of this repository, say), the coordinator and the workers would load that copy
instead of the installed package. Imported here first, with the working directory off ``sys.path``, the
app module is already in ``sys.modules`` when Celery asks for it.
"""

from __future__ import annotations

import importlib
import sys

from celery.__main__ import main as celery_main


def main() -> None:
    app = sys.argv[sys.argv.index("-A") + 1]
    importlib.import_module(app.partition(":")[0])
    celery_main()


if __name__ == "__main__":
    main()
