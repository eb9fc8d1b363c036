#!/usr/bin/env python3
"""identity_example: create or load an identity, print its fingerprint, set
and verify a PIN, then show the PIN lockout in a scratch directory.

    PYTHONPATH=bindings/python python3 examples/python/identity_example.py DIR
"""

import sys
import tempfile
import time
from typing import List, Tuple

try:
    import itsme
except Exception as error:  # the library is missing or cannot run here
    sys.exit(f"{sys.argv[0]}: cannot load libitsme: {error}")

PIN = "123456"
WRONG_PIN = "000000"


def open_identity(directory: str) -> Tuple[itsme.SecretStore, itsme.Identity]:
    """Opens DIR's store and loads its identity, or creates one named "Example"."""
    store = itsme.SecretStore.file(directory)
    try:
        return store, itsme.Identity.load(store)
    except itsme.NotFoundError:
        pass
    try:
        return store, itsme.Identity.create(store, "Example")
    except BaseException:
        store.close()
        raise


def show_lockout() -> None:
    """Five wrong PINs lock out even the right one; prints the wait."""
    with tempfile.TemporaryDirectory(prefix="itsme-example-") as directory:
        store, identity = open_identity(directory)
        with store, identity:
            now = int(time.time())
            identity.set_pin(PIN)
            for _ in range(5):
                try:
                    identity.verify_pin(WRONG_PIN, now)
                except itsme.WrongPinError:
                    continue
                raise RuntimeError("a wrong PIN was not refused")
            try:
                identity.verify_pin(PIN, now)
            except itsme.LockedError as error:
                failures, wait = identity.pin_status(now)
                print(f"lockout: {error.message} (wait {wait} s)")
            else:
                raise RuntimeError("expected a lockout")


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} DIR", file=sys.stderr)
        return 2
    try:
        store, identity = open_identity(argv[1])
        with store, identity:
            print(f"fingerprint: {identity.fingerprint}")
            if not identity.pin_is_set():
                identity.set_pin(PIN)
            identity.verify_pin(PIN, int(time.time()))
            print("pin: verified")
        show_lockout()
    except Exception as error:
        print(f"{argv[0]}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
