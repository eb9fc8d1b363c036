"""The relay's database and its logs are its owner's only (PROTOCOL.md 15.2):
mode 0600 whatever the umask, and an existing file is narrowed to 0600."""

import os
import stat

import pytest

from relaytest import new_id


@pytest.fixture
def open_umask():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def use(r) -> None:
    """Writes through the write-ahead log (a record, an invite, a deletion)."""
    api = r.api()
    assert api.put_record(new_id(), b"record bytes").status_code == 201
    invite = api.open_invite()
    assert api.post(invite.id, invite.inviter, b"a message").status_code == 201
    assert api.delete(invite.id, invite.invitee).status_code == 204


def test_a_new_database_and_its_logs_are_0600_under_umask_022(relay, open_umask):
    r = relay()
    use(r)
    files = [r.database, r.database.with_name(r.database.name + "-wal"), r.database.with_name(r.database.name + "-shm")]
    for path in files:
        assert path.exists(), f"{path.name} was not created"
        assert mode(path) == 0o600, f"{path.name} has mode {mode(path):o}"


def test_an_existing_database_and_log_are_narrowed_to_0600(relay, open_umask, tmp_path):
    database = tmp_path / "existing.sqlite"
    wal = tmp_path / "existing.sqlite-wal"
    for path in (database, wal):
        path.touch()
        os.chmod(path, 0o644)
    r = relay(database=database)
    use(r)
    for path in (database, wal, tmp_path / "existing.sqlite-shm"):
        assert mode(path) == 0o600, f"{path.name} has mode {mode(path):o}"
