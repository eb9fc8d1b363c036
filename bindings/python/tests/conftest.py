"""Shared fixtures.  ITSME_LIBRARY defaults to the repository's release build."""

import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

_built = REPO / ".build" / "release" / "libitsme.so"
if not os.environ.get("ITSME_LIBRARY") and _built.exists():
    os.environ["ITSME_LIBRARY"] = str(_built)

import itsme  # noqa: E402  (after choosing the library)


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
