"""Shared fixtures.  ITSME_LIBRARY defaults to the repository's release build.

A test that calls a function of include/itsme_testing.h, which only a test
build of the library exports, is skipped against a release build: it raises
``itsme._ffi.TestBuildRequiredError`` there, and is reported as skipped with
what to build.
"""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

_built = REPO / ".build" / "release" / "libitsme.so"
if not os.environ.get("ITSME_LIBRARY") and _built.exists():
    os.environ["ITSME_LIBRARY"] = str(_built)

import itsme  # noqa: E402  (after choosing the library)
from itsme import _ffi  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(_ffi.TestBuildRequiredError):
        error = call.excinfo.value
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: needs a test build of libitsme: {error}")


@pytest.fixture
def testing_lib():
    """The loaded library, for a test of a function of include/itsme_testing.h:
    skips unless the library is a test build (which exports them all)."""
    if not _ffi.testing_functions_available():
        pytest.skip(
            f"needs a test build of libitsme: {_ffi.TESTING_BUILD_COMMAND}, then {_ffi.LIBRARY_ENV} set to its library"
        )
    return _ffi.lib


@pytest.fixture
def store():
    """An empty in-memory secret store."""
    with itsme.SecretStore.memory() as s:
        yield s


@pytest.fixture
def identity(store):
    """An identity named "Alice" in an in-memory store."""
    with itsme.Identity.create(store, "Alice") as ident:
        yield ident


class DictBackend:
    """A secret-store backend in a plain dict, recording every call."""

    def __init__(self, items=None):
        self.items = {} if items is None else items
        self.calls = []
        self.accessibility = {}

    def get(self, name):
        self.calls.append(("get", name))
        return self.items.get(name)

    def put(self, name, value, accessibility):
        self.calls.append(("put", name))
        assert isinstance(value, bytes)
        self.items[name] = value
        self.accessibility[name] = accessibility

    def remove(self, name):
        self.calls.append(("remove", name))
        return self.items.pop(name, None) is not None


@pytest.fixture
def backend():
    """A fresh :class:`DictBackend`."""
    return DictBackend()
