"""How `itsme` fails: one line on standard error ("itsme: ..."), the
documented exit code, and never a crash or a stack trace. Imported by the
tests that check failures."""

CRASH = ("Fatal error", "Stack dump", "backtrace", "Current stack trace", "Illegal instruction", "Segmentation")


def assert_error(result, code, *fragments):
    """`result` (a finished run) failed with exit `code`, in one line on
    standard error that contains every one of `fragments`."""
    everything = result.stdout + result.stderr
    for crash in CRASH:
        assert crash not in everything, everything
    assert result.returncode == code, (
        f"exit {result.returncode}, expected {code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"stderr is not one line: {result.stderr!r}"
    assert lines[0].startswith("itsme: "), lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
