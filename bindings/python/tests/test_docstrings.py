"""Every example in the binding's docstrings runs, against the library
(doctest): an example copied as written works, with the signatures of this
version.  An example is a ``>>>`` session; a literal block (``::``) of code,
which doctest would not run, is refused.

Each docstring runs in a fresh world: what ``from itsme import *`` gives,
``itsme`` itself, and, named as the examples name them, ``tmp`` (an empty directory), ``now`` (a fixed unix time, the
start of a 30-second window), Alice's ``secrets``, ``me``, ``contacts``,
and Bob's ``their_secrets``, ``them``, ``their_contacts``: two people who
exchanged QR codes an hour before ``now`` and confirmed, ``contact_id``
being Bob in Alice's store and ``their_id`` Alice in Bob's.
"""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pkgutil
import re

import pytest

import itsme
from test_relay_records import relay_url  # noqa: F401  (a fixture: a relay on 127.0.0.1)

NOW = 1_800_000_000
MODULES = ["itsme"] + sorted(name for _, name, _ in pkgutil.iter_modules(itsme.__path__, "itsme."))
# The modules whose docstrings hold examples; a module that gains one is
# added here by the test below.
WITH_EXAMPLES = {
    "itsme",
    "itsme._approval",
    "itsme._exchange",
    "itsme._online_verify",
    "itsme._pin_update",
    "itsme._profile",
    "itsme._rollcall",
    "itsme._transfer",
    "itsme._voice",
    "itsme.relay",
}


def world(tmp_path):
    """The globals every docstring's examples start from."""
    secrets = itsme.SecretStore.memory()
    me = itsme.Identity.create(secrets, "Alice")
    contacts = itsme.ContactStore.open(me, tmp_path / "alice-contacts.db")
    their_secrets = itsme.SecretStore.memory()
    them = itsme.Identity.create(their_secrets, "Bob")
    their_contacts = itsme.ContactStore.open(them, tmp_path / "bob-contacts.db")
    met = NOW - 3600
    with itsme.Exchange.qr(me, contacts, met) as mine, itsme.Exchange.qr(them, their_contacts, met) as theirs:
        mine.receive(theirs.next_outgoing(), met)
        theirs.receive(mine.next_outgoing(), met)
        contact_id = mine.confirm(met)
        their_id = theirs.confirm(met)
    work = tmp_path / "work"
    work.mkdir()
    return {
        "itsme": itsme,
        "tmp": str(work),
        "now": NOW,
        "secrets": secrets,
        "me": me,
        "contacts": contacts,
        "contact_id": contact_id,
        "their_secrets": their_secrets,
        "them": them,
        "their_contacts": their_contacts,
        "their_id": their_id,
    }


def docstrings(module):
    """The module's doctests (its own objects only, not what it imports)."""
    return doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__)


@pytest.mark.parametrize("name", MODULES)
def test_every_docstring_example_runs(name, tmp_path, request):
    module = importlib.import_module(name)
    extra = {}
    if name == "itsme.relay":
        # A real relay (test_relay_records.py's; the binding's stage runs
        # before the relay is built, and CI runs this again after it).
        extra["relay_url"] = request.getfixturevalue("relay_url")
    tests = docstrings(module)
    examples = sum(len(test.examples) for test in tests)
    assert (examples > 0) == (name in WITH_EXAMPLES), f"{name}: {examples} examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    reports = []
    for n, test in enumerate(tests):
        if not test.examples:
            continue
        place = tmp_path / str(n)
        place.mkdir()
        # What `from itsme import *` gives, as a program that uses the
        # package has, and the module's own public names: not its private
        # imports.
        test.globs = {key: getattr(itsme, key) for key in itsme.__all__}
        test.globs.update({key: getattr(module, key) for key in getattr(module, "__all__", [])})
        test.globs.update(world(place), **extra)
        runner.run(test, out=reports.append)
    result = runner.summarize(verbose=False)
    assert result.attempted == examples
    assert result.failed == 0, "".join(reports)


def test_the_readme_examples_run(tmp_path, monkeypatch):
    """bindings/python/README.md's Python examples, as written."""
    readme = pathlib.Path(__file__).resolve().parents[1] / "README.md"
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(readme), "exec"), {})


# A literal block: a paragraph ending in "::", then indented lines.
LITERAL = re.compile(r"::\n\s*\n([ \t]+)(\S[^\n]*)")


@pytest.mark.parametrize("name", MODULES)
def test_no_example_is_a_literal_block(name):
    """Code shown as a literal block would never run: every example is a
    doctest session."""
    module = importlib.import_module(name)
    for test in doctest.DocTestFinder(exclude_empty=False).find(module, module.__name__):
        text = test.docstring or ""
        for match in LITERAL.finditer(text):
            assert match.group(2).startswith(">>>"), f"{test.name}: a literal block, not an example: {match.group(2)!r}"
