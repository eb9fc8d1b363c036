"""The PIN: setting, checking, changing and the attempt limiter."""

import threading

import pytest

import itsme
from itsme import Identity, Result, SecretStore

T0 = 1_700_000_000
PIN = "123456"
WRONG = "000000"
FIRST_LOCK = 300
MAX_LOCK = 86400
MALFORMED = [
    "12345",
    "1234567",
    "12a456",
    "",
    "١٢٣٤٥٦",  # Arabic-Indic digits
    "１２３４５６",  # fullwidth digits
    "12 456",
    " 123456",
    "123456\n",
    "-12345",
]


@pytest.fixture
def pinned(identity):
    """An identity whose PIN is "123456"."""
    identity.set_pin(PIN)
    return identity


def expect(code, call, *args, **kwargs):
    with pytest.raises(itsme.ItsMeError) as info:
        call(*args, **kwargs)
    assert info.value.code == code, f"expected {Result(code).name}, got {info.value!r}"
    return info.value


def test_set_and_verify(identity):
    assert identity.pin_is_set() is False
    identity.set_pin(PIN)
    assert identity.pin_is_set() is True
    identity.verify_pin(PIN)
    identity.verify_pin(PIN, now=T0)
    assert identity.pin_status(T0) == (0, 0)


def test_pin_status_is_a_named_tuple(pinned):
    status = pinned.pin_status(T0)
    assert isinstance(status, itsme.PinStatus)
    failures, wait = status
    assert (status.failures, status.wait_seconds) == (failures, wait) == (0, 0)


def test_wrong_pin(pinned):
    error = expect(Result.ITSME_E_WRONG_PIN, pinned.verify_pin, WRONG, T0)
    assert isinstance(error, itsme.WrongPinError)
    assert error.name == "ITSME_E_WRONG_PIN"
    assert PIN not in str(error) and WRONG not in str(error)
    assert pinned.pin_status(T0) == (1, 0)


def test_change_pin(pinned):
    pinned.change_pin(PIN, "654321", now=T0)
    expect(Result.ITSME_E_WRONG_PIN, pinned.verify_pin, PIN, T0)
    pinned.verify_pin("654321", T0)
    assert pinned.pin_status(T0) == (0, 0)


def test_change_pin_with_wrong_old_pin_counts(pinned):
    expect(Result.ITSME_E_WRONG_PIN, pinned.change_pin, WRONG, "654321", T0)
    assert pinned.pin_status(T0) == (1, 0)
    pinned.verify_pin(PIN, T0)


@pytest.mark.parametrize("new_pin", MALFORMED)
def test_change_pin_checks_new_pin_first(pinned, new_pin):
    # Even with a wrong old PIN, a malformed new one is refused uncounted.
    expect(Result.ITSME_E_INVALID_PIN, pinned.change_pin, WRONG, new_pin, T0)
    expect(Result.ITSME_E_INVALID_PIN, pinned.change_pin, PIN, new_pin, T0)
    assert pinned.pin_status(T0) == (0, 0)
    pinned.verify_pin(PIN, T0)


@pytest.mark.parametrize("pin", MALFORMED)
def test_malformed_pin_is_invalid_and_not_counted(pinned, pin):
    error = expect(Result.ITSME_E_INVALID_PIN, pinned.verify_pin, pin, T0)
    assert isinstance(error, itsme.InvalidPinError)
    assert pinned.pin_status(T0) == (0, 0)


@pytest.mark.parametrize("pin", MALFORMED)
def test_malformed_first_pin_is_refused(identity, pin):
    expect(Result.ITSME_E_INVALID_PIN, identity.set_pin, pin)
    assert identity.pin_is_set() is False


def test_malformed_pins_do_not_add_up(pinned):
    for _ in range(10):
        expect(Result.ITSME_E_INVALID_PIN, pinned.verify_pin, "12345", T0)
    assert pinned.pin_status(T0) == (0, 0)
    pinned.verify_pin(PIN, T0)


def test_set_pin_twice_already_exists(pinned):
    error = expect(Result.ITSME_E_ALREADY_EXISTS, pinned.set_pin, "654321")
    assert isinstance(error, itsme.AlreadyExistsError)
    pinned.verify_pin(PIN, T0)


def test_verify_without_pin_not_found(identity):
    error = expect(Result.ITSME_E_NOT_FOUND, identity.verify_pin, PIN, T0)
    assert isinstance(error, itsme.NotFoundError)
    expect(Result.ITSME_E_NOT_FOUND, identity.change_pin, PIN, "654321", T0)
    assert identity.pin_status(T0) == (0, 0)


def test_negative_time_is_invalid(pinned):
    expect(Result.ITSME_E_INVALID_ARGUMENT, pinned.verify_pin, PIN, -1)
    expect(Result.ITSME_E_INVALID_ARGUMENT, pinned.change_pin, PIN, "654321", -1)
    expect(Result.ITSME_E_INVALID_ARGUMENT, pinned.pin_status, -1)
    assert pinned.pin_status(T0) == (0, 0)


def test_time_out_of_int64_range(pinned):
    with pytest.raises(itsme.InvalidArgumentError):
        pinned.verify_pin(PIN, 2**63)
    with pytest.raises(TypeError):
        pinned.verify_pin(PIN, 1.5)


def fail_five_times(ident, now):
    for attempt in range(1, 6):
        expect(Result.ITSME_E_WRONG_PIN, ident.verify_pin, WRONG, now)
        expected_wait = FIRST_LOCK if attempt == 5 else 0
        assert ident.pin_status(now) == (attempt, expected_wait)


def test_lockout_after_five_failures(pinned):
    fail_five_times(pinned, T0)
    assert pinned.pin_status(T0) == (5, FIRST_LOCK)
    # Refused without being checked or counted, even with the right PIN.
    error = expect(Result.ITSME_E_LOCKED, pinned.verify_pin, PIN, T0)
    assert isinstance(error, itsme.LockedError)
    expect(Result.ITSME_E_LOCKED, pinned.verify_pin, WRONG, T0 + 1)
    expect(Result.ITSME_E_LOCKED, pinned.change_pin, PIN, "654321", T0 + 2)
    assert pinned.pin_status(T0) == (5, FIRST_LOCK)
    assert pinned.pin_status(T0 + 100) == (5, FIRST_LOCK - 100)
    expect(Result.ITSME_E_LOCKED, pinned.verify_pin, PIN, T0 + FIRST_LOCK - 1)
    assert pinned.pin_status(T0 + FIRST_LOCK - 1) == (5, 1)
    # Once the wait is over an attempt is allowed, and a success clears it.
    assert pinned.pin_status(T0 + FIRST_LOCK) == (5, 0)
    pinned.verify_pin(PIN, T0 + FIRST_LOCK)
    assert pinned.pin_status(T0 + FIRST_LOCK) == (0, 0)


def test_clock_set_back_does_not_lengthen_the_wait(pinned):
    fail_five_times(pinned, T0)
    assert pinned.pin_status(T0 - 10_000) == (5, FIRST_LOCK)
    assert pinned.pin_status(0) == (5, FIRST_LOCK)
    expect(Result.ITSME_E_LOCKED, pinned.verify_pin, PIN, T0 - 10_000)


def test_lockout_doubles_and_caps(pinned):
    fail_five_times(pinned, T0)
    now, wait, failures = T0, FIRST_LOCK, 5
    while True:
        now += wait
        assert pinned.pin_status(now) == (failures, 0)
        expect(Result.ITSME_E_WRONG_PIN, pinned.verify_pin, WRONG, now)
        failures += 1
        expected = min(wait * 2, MAX_LOCK)
        assert pinned.pin_status(now) == (failures, expected), f"after {failures} failures"
        if wait == MAX_LOCK:
            break
        wait = expected
    assert failures == 15  # 300 * 2**8 = 76800; the next doubling caps at 86400
    expect(Result.ITSME_E_LOCKED, pinned.verify_pin, PIN, now + MAX_LOCK - 1)
    pinned.verify_pin(PIN, now + MAX_LOCK)
    assert pinned.pin_status(now + MAX_LOCK) == (0, 0)


def test_success_resets_failures(pinned):
    for _ in range(4):
        expect(Result.ITSME_E_WRONG_PIN, pinned.verify_pin, WRONG, T0)
    assert pinned.pin_status(T0) == (4, 0)
    pinned.verify_pin(PIN, T0)
    assert pinned.pin_status(T0) == (0, 0)
    # A fresh run of five failures is needed for the next lockout.
    fail_five_times(pinned, T0)


def test_successful_change_resets_failures(pinned):
    expect(Result.ITSME_E_WRONG_PIN, pinned.verify_pin, WRONG, T0)
    pinned.change_pin(PIN, "654321", T0)
    assert pinned.pin_status(T0) == (0, 0)


def test_lockout_survives_reopening(tmp_path):
    directory = tmp_path / "store"
    with SecretStore.file(directory) as store, Identity.create(store, "Locked") as ident:
        ident.set_pin(PIN)
        fail_five_times(ident, T0)
    with SecretStore.file(directory) as store, Identity.load(store) as ident:
        assert ident.pin_is_set()
        assert ident.pin_status(T0) == (5, FIRST_LOCK)
        expect(Result.ITSME_E_LOCKED, ident.verify_pin, PIN, T0 + 10)
    with SecretStore.file(directory) as store, Identity.load(store) as ident:
        assert ident.pin_status(T0 + FIRST_LOCK) == (5, 0)
        ident.verify_pin(PIN, T0 + FIRST_LOCK)
    with SecretStore.file(directory) as store, Identity.load(store) as ident:
        assert ident.pin_status(T0 + FIRST_LOCK) == (0, 0)


def test_two_handles_share_the_limiter(store, pinned):
    with Identity.load(store) as other:
        fail_five_times(other, T0)
        assert pinned.pin_status(T0) == (5, FIRST_LOCK)
        expect(Result.ITSME_E_LOCKED, pinned.verify_pin, PIN, T0)


@pytest.mark.parametrize("trial", range(3))
def test_concurrent_attempts_through_several_handles_are_all_counted(store, pinned, trial):
    # Each handle serialises its own calls; the limiter must still count
    # every attempt made through other handles on the same store.
    handles = [Identity.load(store) for _ in range(8)]
    barrier = threading.Barrier(len(handles))
    outcomes = []

    def attempt(handle):
        barrier.wait()
        try:
            handle.verify_pin(WRONG, T0)
        except itsme.ItsMeError as error:
            outcomes.append(error.name)

    threads = [threading.Thread(target=attempt, args=(handle,)) for handle in handles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for handle in handles:
        handle.close()
    assert sorted(outcomes) == ["ITSME_E_LOCKED"] * 3 + ["ITSME_E_WRONG_PIN"] * 5
    assert pinned.pin_status(T0) == (5, FIRST_LOCK)
