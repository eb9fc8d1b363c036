"""A contact store put back to an older copy, or emptied, is refused with a
way out; `itsme contacts accept-loss` shows what was lost and, once the
person agrees, uses the store as it is (docs/STORAGE.md, "Commits and
rollback")."""

import shutil

from cli_errors import assert_error


def store_files(person):
    return [person.dir / name for name in ("contacts.db", "contacts.db-wal", "contacts.db-shm")]


def test_an_older_copy_is_refused_until_the_loss_is_accepted(pair, tmp_path):
    alice, _ = pair
    older = tmp_path / "older.db"
    alice.ok("contacts", "list")  # every handle closed: the main file is whole
    shutil.copyfile(alice.dir / "contacts.db", older)
    alice.ok("contacts", "rename", "Bob", "Robert")
    alice.ok("contacts", "rename", "Robert", "Bobby")
    for path in store_files(alice):
        path.unlink(missing_ok=True)
    shutil.copyfile(older, alice.dir / "contacts.db")

    assert_error(alice.run("contacts", "list"), 2, "2 committed changes behind", "itsme contacts accept-loss")

    declined = alice.run("contacts", "accept-loss", input="n\n")
    assert declined.returncode == 0, declined
    assert "Nothing changed." in declined.stdout
    assert alice.run("contacts", "list").returncode == 2, "declining changes nothing"

    accepted = alice.json("contacts", "accept-loss", "--yes")
    assert accepted["accepted"] is True
    assert accepted["commitsLost"] == 2 and accepted["replaced"] is False
    assert accepted["contactsBefore"] == accepted["contactsNow"] == 1
    names = [c["name"] for c in alice.json("contacts", "list")["contacts"]]
    assert names == ["Bob"], "the older copy, as it is"
    assert alice.json("contacts", "accept-loss")["accepted"] is False, "nothing more to accept"


def test_an_emptied_store_is_not_taken_for_a_new_one(pair):
    alice, _ = pair
    for path in store_files(alice):
        path.unlink(missing_ok=True)
    (alice.dir / "contacts.db").write_bytes(b"")
    assert_error(alice.run("contacts", "list"), 2, "is empty", "1 contacts")
    assert (alice.dir / "contacts.db").stat().st_size == 0, "nothing was written in its place"
    out = alice.ok("contacts", "accept-loss", "--yes")
    assert "the file is not the store last seen here (which had 1 contacts); it has 0" in out
    assert alice.json("contacts", "list")["contacts"] == []
