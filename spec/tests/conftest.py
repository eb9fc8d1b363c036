"""The independent implementation's tests read the vectors of the repository
(Tests/ProtocolVectors); test_independent_18_19.py also checks the library,
through the Python binding of this repository (bindings/python) and the
library ITSME_LIBRARY names, by default the repository's release build."""

import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

sys.path.insert(0, str(REPO / "bindings" / "python"))
_built = REPO / ".build" / "release" / "libitsme.so"
if not os.environ.get("ITSME_LIBRARY") and _built.exists():
    os.environ["ITSME_LIBRARY"] = str(_built)

import pytest  # noqa: E402

import itsme  # noqa: E402  (after choosing the library)


@pytest.fixture
def identity():
    """An identity named "Alice" in an in-memory secret store."""
    with itsme.SecretStore.memory() as store, itsme.Identity.create(store, "Alice") as ident:
        yield ident
