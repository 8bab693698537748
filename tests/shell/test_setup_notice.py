"""`make setup` showed setuptools' "Editable installation" warning box (issue #29 §11): the
Makefile's PYTHONWARNINGS filter must silence setuptools' own notice."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

MAKEFILE = (Path(__file__).resolve().parents[2] / "Makefile").read_text()


def test_the_editable_install_runs_with_a_filter_that_silences_setuptools_notice():
    install = [l for l in MAKEFILE.splitlines() if "pip install -v -e '.[all,test]'" in l]
    assert len(install) == 1 and install[0].lstrip().startswith('PYTHONWARNINGS="$(EDITABLE_NOTICE)" ')
    (value,) = re.findall(r"^EDITABLE_NOTICE := (.+)$", MAKEFILE, flags=re.M)
    sw = pytest.importorskip("setuptools.warnings")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sw.InformationOnly.emit("Editable installation.", "Please be careful with folders in your working directory")
        assert len(seen) == 1  # shown without the filter
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings._setoption(value)  # as the interpreter reads PYTHONWARNINGS
        sw.InformationOnly.emit("Editable installation.", "Please be careful with folders in your working directory")
        sw.SetuptoolsWarning.emit("Something else.", "still shown")
    assert [str(w.message).splitlines()[0] for w in seen] == ["Something else."]
