"""The ``rizz`` command (and ``python -m rizz``): :func:`rizz.apps.cli.main`, or, where an
extra it needs is not installed, one line naming that extra (exit 2)::

    $ rizz policy check my.yaml        # a base install: pip install rizz
    rizz: the rizz command needs the 'cli' extra: pip install 'rizz[cli]' (No module named 'typer')
"""

from __future__ import annotations

import sys

from rizz.extras import missing_extra

__all__ = ["main"]


def main() -> None:
    """Run the command line; a missing extra ends it with one line on stderr and exit code 2."""
    try:
        # lazy: typer and rich (the 'cli' extra) may be missing; the ImportError is named below
        from rizz.apps.cli import main as cli_main

        cli_main()
    except ImportError as e:
        err = missing_extra(e, "the rizz command")
        if err is None:
            raise
        print(f"rizz: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
