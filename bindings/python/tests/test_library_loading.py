"""Finding and loading libitsme: the lookup order (ITSME_LIBRARY, then the
library bundled in the package, then the system's), the refusal of a library
of another ABI, and what the errors say."""

from __future__ import annotations

import os
import pathlib
import pickle
import shutil
import subprocess
import sys

import pytest

import itsme
from itsme import _ffi

BINDING = pathlib.Path(__file__).resolve().parent.parent
MAJOR, MINOR = _ffi.ABI_VERSION
ELSEWHERE = os.path.join("elsewhere", f"libitsme.so.{MAJOR}.{MINOR}")
# Version numbers as itsme_version_number gives them: this ABI's, and others.
THIS = MAJOR * 10000 + MINOR * 100
OTHER = THIS + 100


@pytest.fixture
def package_dir(tmp_path):
    """A package directory with nothing in it yet."""
    directory = tmp_path / "package"
    directory.mkdir()
    return directory


def bundle(directory):
    """Puts a (fake: it is never loaded here) libitsme.so into directory."""
    path = directory / _ffi.BUNDLED_LIBRARY_FILE
    path.write_bytes(b"not loaded by the lookup")
    return str(path)


# -- the lookup order ------------------------------------------------------


def test_itsme_library_beats_the_bundled_library(package_dir):
    bundle(package_dir)
    environ = {_ffi.LIBRARY_ENV: ELSEWHERE}
    assert _ffi.find_library_path(environ, str(package_dir)) == ELSEWHERE


def test_itsme_library_beats_the_system_library(package_dir):
    environ = {_ffi.LIBRARY_ENV: ELSEWHERE}
    assert _ffi.find_library_path(environ, str(package_dir)) == ELSEWHERE


def test_bundled_library_beats_the_system_library(package_dir):
    bundled = bundle(package_dir)
    assert _ffi.find_library_path({}, str(package_dir)) == bundled
    # An empty ITSME_LIBRARY is no path: as if unset.
    assert _ffi.find_library_path({_ffi.LIBRARY_ENV: ""}, str(package_dir)) == bundled


def test_without_a_bundled_library_the_system_library(package_dir):
    system = _ffi.find_library_path({}, str(package_dir))
    assert system == _ffi._system_library()[0]
    assert not system.startswith(str(package_dir))
    import ctypes.util

    assert system == (ctypes.util.find_library("itsme") or _ffi.SYSTEM_LIBRARY_FILE)


def test_the_bundled_library_is_looked_for_next_to_the_binding():
    assert _ffi._PACKAGE_DIR == os.path.dirname(os.path.abspath(_ffi.__file__))
    assert _ffi.BUNDLED_LIBRARY_FILE == "libitsme.so"


def test_the_package_is_typed():
    """py.typed (PEP 561): type checkers read the package's annotations."""
    assert (pathlib.Path(itsme.__file__).parent / "py.typed").is_file()


# -- the version check -----------------------------------------------------


def compile_library(tmp_path, name, body):
    """A tiny shared library built from C source, or a skip without a compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / f"{name}.c"
    source.write_text(body)
    library = tmp_path / f"{name}.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return str(library)


def library_of_version(tmp_path, number):
    """A library that is libitsme only in its itsme_version_number()."""
    return compile_library(
        tmp_path,
        f"libversion{number}",
        f"unsigned int itsme_version_number(void) {{ return {number}u; }}\n",
    )


@pytest.mark.parametrize(
    "number",
    [THIS - 100, OTHER, OTHER + 1, 10000 + THIS, 10000, 0, 99],
)
def test_a_library_of_another_abi_is_refused(tmp_path, number):
    text = f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    path = library_of_version(tmp_path, number)
    with pytest.raises(itsme.LibraryVersionError) as caught:
        _ffi.load_library(path)
    error = caught.value
    assert isinstance(error, OSError)
    assert (error.path, error.found, error.expected) == (path, number, (MAJOR, MINOR))
    message = str(error)
    assert repr(path) in message
    assert f"libitsme {text}," in message
    assert f"written for libitsme {MAJOR}.{MINOR} (any {MAJOR}.{MINOR}.x)" in message
    assert _ffi.LIBRARY_ENV in message
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is itsme.LibraryVersionError and str(copy) == message


@pytest.mark.parametrize("number", [THIS, THIS + 1, THIS + 99])
def test_a_library_of_the_same_abi_passes_the_check(tmp_path, number):
    """Any patch of this ABI passes the version check; this one then lacks every other
    function, which load_library reports after the check."""
    path = library_of_version(tmp_path, number)
    with pytest.raises(OSError) as caught:
        _ffi.load_library(path)
    assert not isinstance(caught.value, itsme.LibraryVersionError)
    assert "does not export itsme_" in str(caught.value)
    assert "itsme_version_number" not in str(caught.value)


def test_a_library_without_a_version_is_not_libitsme(tmp_path):
    path = compile_library(tmp_path, "libother", "int something_else(void) { return 1; }\n")
    with pytest.raises(OSError, match="does not export itsme_version_number"):
        _ffi.load_library(path)


def test_the_loaded_library_is_of_the_bindings_abi():
    number = itsme.version_number()
    assert (number // 10000, number // 100 % 100) == _ffi.ABI_VERSION
    assert _ffi.check_version(_ffi.lib, _ffi.lib._name) == number
    assert _ffi.version_text(number) == itsme.version()


# -- importing the package -------------------------------------------------


def import_itsme(environ, pythonpath=BINDING):
    """Runs ``import itsme`` in a fresh interpreter; (return code, stdout, stderr)."""
    env = {key: value for key, value in os.environ.items() if key != _ffi.LIBRARY_ENV}
    env.update(environ)
    env["PYTHONPATH"] = str(pythonpath)
    program = "import itsme, itsme._ffi as f; print(f.lib._name)"
    # From pythonpath: the current directory comes first on sys.path.
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, cwd=str(pythonpath), capture_output=True, text=True
    )
    return done.returncode, done.stdout.strip(), done.stderr


def test_importing_refuses_a_library_of_another_abi(tmp_path):
    path = library_of_version(tmp_path, OTHER)
    code, _, stderr = import_itsme({_ffi.LIBRARY_ENV: path})
    assert code != 0
    assert "LibraryVersionError" in stderr and f"libitsme {MAJOR}.{MINOR + 1}.0" in stderr and path in stderr


def test_importing_without_a_library_says_what_to_do(tmp_path):
    missing = str(tmp_path / "nowhere" / "libitsme.so")
    code, _, stderr = import_itsme({_ffi.LIBRARY_ENV: missing})
    assert code != 0
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("OSError: cannot load libitsme from")
    assert f"{_ffi.LIBRARY_ENV}={missing!r}" in last
    assert "install the itsme-verify wheel" in last and "make install" in last
    assert f"set {_ffi.LIBRARY_ENV} to the path of libitsme.so" in last


def test_importing_loads_the_bundled_library(tmp_path):
    """A copy of the package with the real library inside, as the wheel
    installs it, loads that library when ITSME_LIBRARY is not set."""
    root = tmp_path / "site"
    shutil.copytree(pathlib.Path(itsme.__file__).parent, root / "itsme", ignore=shutil.ignore_patterns("__pycache__"))
    bundled = root / "itsme" / _ffi.BUNDLED_LIBRARY_FILE
    shutil.copyfile(os.path.realpath(_ffi.lib._name), bundled)
    code, stdout, stderr = import_itsme({}, pythonpath=root)
    assert code == 0, stderr
    assert stdout == str(bundled)
    # ITSME_LIBRARY still wins over it.
    code, stdout, stderr = import_itsme({_ffi.LIBRARY_ENV: _ffi.lib._name}, pythonpath=root)
    assert code == 0, stderr
    assert stdout == _ffi.lib._name


def test_the_bundled_library_is_not_left_for_another(tmp_path):
    """A bundled file that does not load is an error, not a reason to take
    whatever the system has: the message names it."""
    root = tmp_path / "site"
    shutil.copytree(pathlib.Path(itsme.__file__).parent, root / "itsme", ignore=shutil.ignore_patterns("__pycache__"))
    bundled = bundle(root / "itsme")
    code, _, stderr = import_itsme({}, pythonpath=root)
    assert code != 0
    assert f"cannot load libitsme from {bundled!r}" in stderr
    assert f"the library bundled in the package ({bundled!r})" in stderr
