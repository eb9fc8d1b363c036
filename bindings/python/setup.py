"""The wheel's platform tag.

`make wheel` puts the release library into the package (itsme/libitsme.so)
before building; a distribution that carries a native library is not pure,
so setuptools must tag it for a platform (auditwheel then makes the tag
manylinux).  Without the library (an install from a source checkout that
loads an installed libitsme), the wheel stays pure Python.
"""

from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution

BUNDLED = Path(__file__).parent / "itsme" / "libitsme.so"


class _BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


setup(distclass=_BinaryDistribution if BUNDLED.exists() else Distribution)
