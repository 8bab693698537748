"""Issue #26 §3: one exception root. Every exception class the rizz package defines is a
``rizz.RizzError`` and keeps its standard base (``except ValueError`` callers still work)."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

import pytest

import rizz
from rizz import RizzError


def _modules() -> list[str]:
    names = ["rizz"]
    for info in pkgutil.walk_packages(rizz.__path__, prefix="rizz."):
        names.append(info.name)
    return sorted(names)


@functools.cache
def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)  # every module imports in the test environment (all extras)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name:
                found[f"{name}.{obj.__qualname__}"] = obj
    return found


def test_every_exception_class_of_the_package_is_a_rizz_error() -> None:
    classes = _exception_classes()
    assert len(classes) >= 20, sorted(classes)  # the walk reaches the whole package
    assert [n for n, c in classes.items() if not issubclass(c, RizzError)] == []


@pytest.mark.parametrize("name, base", [
    ("rizz.formats.policy_file.PolicyError", ValueError),
    ("rizz.engine.session.SessionError", ValueError),
    ("rizz.core.compiler.PromptBudgetError", ValueError),
    ("rizz.store.durable.DiskFull", OSError),
    ("rizz.adapters.models.base.ModelError", RuntimeError),
    ("rizz.apps.serve.tenants.ModelQueueTimeout", TimeoutError),
    ("rizz.apps.serve.tenants.UnknownId", LookupError),
    ("rizz.errors.MissingExtraError", ImportError),
])
def test_the_standard_bases_are_kept(name: str, base: type[BaseException]) -> None:
    assert issubclass(_exception_classes()[name], base)


def test_the_root_is_importable_from_the_core_and_the_package() -> None:
    import rizz.core

    assert rizz.core.RizzError is RizzError is rizz.errors.RizzError
    with pytest.raises(RizzError):
        rizz.load_policy("no-such-policy")  # PolicyError
