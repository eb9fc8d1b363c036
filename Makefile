# libitsme: build, install and test.
#
#   make                  release build of libitsme.so (self-contained Swift runtime)
#   make install PREFIX=/usr/local   library, header and itsme.pc
#   make install-cli PREFIX=/usr/local   the command-line client `itsme` and itsme-relay
#   make demo             the end-to-end demo (`itsme demo`), from a debug build
#   make test             every test: Swift, C, Python, Rust, ABI checks
#   make bench            the benchmark suites (crypto, store, exchange, verify)
#   make bench-relay      the relay's benchmark (builds relay/ in release; 2-3 minutes)

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
VERSION := $(shell sed -n 's/^\#define ITSME_VERSION_STRING "\(.*\)"/\1/p' include/itsme.h)
MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME := libitsme.so.$(MAJOR)

RELEASE_DIR := .build/release
LIB := $(RELEASE_DIR)/libitsme.so

# -static-stdlib links the Swift runtime into the library (SwiftPM's
# --static-swift-stdlib does nothing for dynamic libraries). lld, which ships
# with the toolchain, leaves only the itsme_* functions in the dynamic symbol
# table (gold keeps local entries for some Swift metadata).
SWIFT_RELEASE_FLAGS := -c release --product itsme \
	-Xswiftc -static-stdlib -Xswiftc -use-ld=lld \
	-Xlinker --version-script=$(CURDIR)/support/itsme.map \
	-Xlinker -soname=$(SONAME)

.PHONY: all lib install install-cli uninstall test demo bench bench-relay bench-remote clean

all: lib

lib:
	swift build $(SWIFT_RELEASE_FLAGS)
	ln -sf libitsme.so $(RELEASE_DIR)/$(SONAME)

install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/libitsme.so.$(VERSION)
	ln -sf libitsme.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libitsme.so
	install -m 0644 include/itsme.h $(DESTDIR)$(INCLUDEDIR)/itsme.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    support/itsme.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/itsme.pc

# The command-line client and the relay live in relay/ (a package of its
# own). The product itsme-cli is installed as `itsme`, beside itsme-relay
# (which `itsme relay serve` runs); the Swift runtime is linked in.
BINDIR ?= $(PREFIX)/bin
CLI_RELEASE_FLAGS := -c release --package-path relay --static-swift-stdlib

install-cli:
	swift build $(CLI_RELEASE_FLAGS) --product itsme-cli
	swift build $(CLI_RELEASE_FLAGS) --product itsme-relay
	install -d $(DESTDIR)$(BINDIR)
	install -s -m 0755 relay/.build/release/itsme-cli $(DESTDIR)$(BINDIR)/itsme
	install -s -m 0755 relay/.build/release/itsme-relay $(DESTDIR)$(BINDIR)/itsme-relay

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libitsme.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/libitsme.so.$(VERSION) $(DESTDIR)$(INCLUDEDIR)/itsme.h \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/itsme.pc $(DESTDIR)$(BINDIR)/itsme $(DESTDIR)$(BINDIR)/itsme-relay

demo:
	swift build --package-path relay --product itsme-cli
	relay/.build/debug/itsme-cli demo

test:
	./scripts/test-all

bench:
	swift run -c release itsme-bench crypto
	swift run -c release itsme-bench store
	swift run -c release itsme-bench exchange
	swift run -c release itsme-bench verify

# The relay is a package of its own (relay/); its load generator starts it on
# 127.0.0.1 and measures it from a separate process. The reference, Magic
# Wormhole's mailbox server, goes into a virtualenv under relay/.build; if it
# cannot be installed, the run says so and skips only the reference.
# RELAY_BENCH_FLAGS passes options (--quick, --rooms N, --skip-reference, ...).
WORMHOLE_VENV := relay/.build/wormhole-venv

bench-relay:
	swift build -c release --package-path relay
	@$(WORMHOLE_VENV)/bin/python -c 'import wormhole_mailbox_server' 2>/dev/null || \
	  { python3 -m venv $(WORMHOLE_VENV) && \
	    $(WORMHOLE_VENV)/bin/pip install --quiet --disable-pip-version-check 'magic-wormhole-mailbox-server==0.8.0'; } || \
	  echo "bench-relay: magic-wormhole-mailbox-server could not be installed; the reference will be skipped"
	swift run -c release itsme-bench relay $(RELAY_BENCH_FLAGS)

# The exchange at a distance end to end, against Magic Wormhole's (client and
# mailbox server, in the same virtualenv). REMOTE_BENCH_FLAGS passes options
# (--runs N, --skip-reference).
bench-remote: lib
	swift build -c release --package-path relay
	@$(WORMHOLE_VENV)/bin/python -c 'import wormhole, wormhole_mailbox_server' 2>/dev/null || \
	  { python3 -m venv $(WORMHOLE_VENV) && \
	    $(WORMHOLE_VENV)/bin/pip install --quiet --disable-pip-version-check \
	      'magic-wormhole-mailbox-server==0.8.0' 'magic-wormhole==0.24.0'; } || \
	  echo "bench-remote: magic-wormhole could not be installed; the reference will be skipped"
	swift run -c release itsme-bench remote $(REMOTE_BENCH_FLAGS)

clean:
	rm -rf .build build
