"""Special files where `itsme` expects its own files or a secret: a FIFO, a
directory, a symbolic link (to /dev/zero), a descriptor that is not open.
Each is refused in one line that names it, with exit code 2; nothing waits
forever (every run has a timeout, so a hang fails the test), and nothing in
the data directory is replaced or removed."""

import os
import stat

import pytest

from cli_errors import assert_error

# A run that blocks fails the test long before the suite's own limits.
LIMIT = 20


def run(person, *args, pin_file=True, pass_fds=()):
    return person.run(*args, pin_file=pin_file, timeout=LIMIT, pass_fds=pass_fds)


def make_special(path, kind):
    """Puts a FIFO, a directory or a link to /dev/zero at `path`."""
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        os.mkdir(path, 0o700)
    else:
        os.symlink("/dev/zero", path)


def assert_still_there(path, kind):
    info = os.lstat(path)
    if kind == "fifo":
        assert stat.S_ISFIFO(info.st_mode)
    elif kind == "directory":
        assert stat.S_ISDIR(info.st_mode)
    else:
        assert stat.S_ISLNK(info.st_mode) and os.readlink(path) == "/dev/zero"


WHAT = {
    "fifo": "is a FIFO, not a regular file",
    "directory": "is a directory, not a regular file",
    "link-to-dev-zero": "is a symbolic link, not a regular file",
}

# The secret store


@pytest.mark.parametrize("item", ["itsme.identity", "itsme.pin"])
def test_fifo_in_place_of_a_secret_item(people, item):
    alice = people("Alice", init=True)
    path = alice.dir / "secrets" / item
    os.rename(path, alice.dir / f"{item}.saved")
    os.mkfifo(path, 0o600)
    expected = f"secret item {item} is a FIFO, not a regular file"
    if item == "itsme.identity":
        assert_error(run(alice, "whoami"), 2, expected)
    assert_error(run(alice, "contacts"), 2, expected)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_links_in_place_of_a_secret_item_are_not_followed(people):
    alice = people("Alice", init=True)
    item = alice.dir / "secrets" / "itsme.identity"
    saved = alice.dir / "identity.saved"
    os.rename(item, saved)
    # A link even to the real item is refused: links are not followed.
    for target in (saved, "/dev/zero"):
        os.symlink(target, item)
        assert_error(run(alice, "whoami"), 2, "secret item itsme.identity is a symbolic link", "not followed")
        assert os.readlink(item) == str(target)
        os.unlink(item)
    os.rename(saved, item)
    assert "Alice" in alice.ok("whoami")


# Descriptors


@pytest.mark.parametrize(
    "args, option",
    [
        (["contacts", "--pin-fd", "99"], "--pin-fd 99"),
        (["export", "--password-fd", "99"], "--password-fd 99"),
    ],
)
def test_a_descriptor_that_is_not_open(people, args, option):
    alice = people("Alice", init=True)
    pin_file = option != "--pin-fd 99"
    assert_error(run(alice, *args, pin_file=pin_file), 2, f"{option}: not an open file descriptor")


def test_passphrase_descriptor_that_is_not_open(people):
    alice = people("Alice", init=True)
    # Any secrets.wrap makes the store ask for its passphrase first.
    (alice.dir / "secrets.wrap").write_text("{}")
    assert_error(run(alice, "whoami", "--passphrase-fd", "99"), 2, "--passphrase-fd 99: not an open file descriptor")


def test_a_descriptor_that_is_a_directory_or_endless(people, tmp_path):
    alice = people("Alice", init=True)
    directory = os.open(tmp_path, os.O_RDONLY)
    try:
        result = run(alice, "contacts", "--pin-fd", str(directory), pin_file=False, pass_fds=(directory,))
    finally:
        os.close(directory)
    assert_error(result, 2, f"--pin-fd {directory}: a directory")

    zero = os.open("/dev/zero", os.O_RDONLY)
    try:
        result = run(alice, "contacts", "--pin-fd", str(zero), pin_file=False, pass_fds=(zero,))
    finally:
        os.close(zero)
    assert_error(result, 2, f"--pin-fd {zero}: the first line is longer than 4096 bytes")


@pytest.mark.parametrize("kind", ["fifo", "directory", "link-to-dev-zero"])
def test_pin_file_that_is_not_a_regular_file(people, tmp_path, kind):
    alice = people("Alice", init=True)
    path = tmp_path / "special.pin"
    make_special(path, kind)
    result = run(alice, "contacts", "--pin-file", path, pin_file=False)
    what = "is a character device" if kind == "link-to-dev-zero" else WHAT[kind].split(",")[0]
    assert_error(result, 2, f"--pin-file {path} {what}, not a regular file")


# The data directory's own files


@pytest.mark.parametrize("kind", ["fifo", "directory", "link-to-dev-zero"])
def test_pending_json_that_is_not_a_regular_file(people, kind):
    alice = people("Alice", init=True)
    path = alice.dir / "pending.json"
    make_special(path, kind)
    damaged = f"{path} is damaged: it {WHAT[kind]}"
    assert_error(run(alice, "sas", "show"), 2, damaged)
    # Starting an exchange, or dropping the one in progress, neither waits
    # on it nor removes it.
    assert_error(run(alice, "qr", "show"), 2, damaged)
    assert_error(run(alice, "sas", "reject"), 2, damaged)
    assert_error(run(alice, "invite", "create", "--relay", "http://127.0.0.1:1"), 2, damaged)
    assert_still_there(path, kind)


@pytest.mark.parametrize("kind", ["fifo", "directory", "link-to-dev-zero"])
def test_profile_json_that_is_not_a_regular_file(people, kind):
    alice = people("Alice", init=True)
    path = alice.dir / "profile.json"
    make_special(path, kind)
    damaged = f"{path} is damaged: it {WHAT[kind]}"
    assert_error(run(alice, "profile", "show"), 2, damaged)
    assert_error(run(alice, "profile", "clear"), 2, damaged)
    # Setting a new profile does not replace it (nothing reaches the relay).
    assert_error(run(alice, "profile", "set", "--relay", "http://127.0.0.1:1"), 2, damaged)
    assert_still_there(path, kind)


def test_large_pending_json_is_damaged(people):
    alice = people("Alice", init=True)
    path = alice.dir / "pending.json"
    with open(path, "wb") as f:
        f.truncate(2 << 20)
    assert_error(run(alice, "sas", "show"), 2, f"{path} is damaged: it is {2 << 20} bytes, larger than")
    assert path.stat().st_size == 2 << 20


# Images of QR codes: read as every file named on the command line is.


@pytest.mark.parametrize("kind", ["fifo", "link-to-fifo", "directory", "link-to-dev-zero"])
@pytest.mark.parametrize(
    "command",
    [("qr", "scan", "--image"), ("import", "--image"), ("transfer", "send", "--relay", "http://127.0.0.1:9", "--image")],
    ids=["qr-scan", "import", "transfer-send"],
)
def test_an_image_that_is_not_a_regular_file_is_refused_at_once(people, tmp_path, kind, command):
    """A FIFO nobody writes to (or a link to one) given as a QR code's image
    is refused at once, not waited on; so are a directory and an endless
    device."""
    alice = people("Alice", init=True)
    path = tmp_path / "code.png"
    if kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo", 0o600)
        os.symlink(tmp_path / "fifo", path)
    else:
        make_special(path, kind)
    result = run(alice, *command, path)
    what = {"link-to-fifo": "is a FIFO", "link-to-dev-zero": "is a character device"}.get(kind) or WHAT[kind].split(",")[0]
    assert_error(result, 2, f"the image {path} {what}, not a regular file")
