"""``python -m rizz.adapters.models [NAME ...] | --list``: assemble (and verify) shipped models, or
list them (:func:`rizz.adapters.models.shipped.main`; the Makefile's setup runs it)."""

from rizz.adapters.models.shipped import main

if __name__ == "__main__":
    raise SystemExit(main())
