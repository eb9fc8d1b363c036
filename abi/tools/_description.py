"""What the generators read: the two machine-read descriptions
(abi/README.md), loaded and merged.  Not a generator itself (scripts/abi
runs every abi/tools/*.py but read.py and the modules starting with _)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Type, TypeVar

MAIN = "abi/itsme.abi.json"
TESTING = "abi/itsme_testing.abi.json"
KINDS = ("constants", "typedefs", "enums", "handles", "structs", "callback_tables")


def load(path: str) -> Optional[Dict[str, Any]]:
    """A description, or None where the file does not exist."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        data: Dict[str, Any] = json.load(f)
    return data


class Description:
    """include/itsme.h's description and, when there is one,
    include/itsme_testing.h's: the items of both (the main one's first, each
    once), the main header's functions, and the test build's apart.  The
    generators' writers derive from it."""

    def __init__(self, main: Dict[str, Any], testing: Optional[Dict[str, Any]]) -> None:
        self.main = main
        self.testing = testing
        items: Dict[str, List[Dict[str, Any]]] = {kind: [] for kind in KINDS}
        for source in [main] + ([testing] if testing else []):
            for kind in KINDS:
                into = items[kind]
                seen = {item["name"] for item in into}
                into.extend(item for item in source.get(kind, []) if item["name"] not in seen)
        self.constants = items["constants"]
        self.typedefs = items["typedefs"]
        self.enums = items["enums"]
        self.handles = items["handles"]
        self.structs = items["structs"]
        self.callback_tables = items["callback_tables"]
        self.functions: List[Dict[str, Any]] = list(main["functions"])
        bound = {f["name"] for f in self.functions}
        self.testing_functions: List[Dict[str, Any]] = [
            f for f in (testing or {}).get("functions", []) if f["name"] not in bound]


D = TypeVar("D", bound=Description)


def read(kind: Type[D]) -> D:
    """The descriptions, as a `kind` (a Description or a writer deriving
    from it)."""
    main = load(MAIN)
    if main is None:
        raise SystemExit(f"{MAIN} is missing: run scripts/abi generate")
    return kind(main, load(TESTING))
