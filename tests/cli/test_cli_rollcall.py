"""`itsme roll-call`: four devices and five people in one roll call through a
real relay (PROTOCOL.md 20). Ana added Ben and Cai; Cai's device forgot its
device secrets since (Ana sees a changed device); Dee's device holds no seed
with anyone (unknown to all); Eve is on the call without a device (she
appears nowhere, and the head count shows the difference)."""

from __future__ import annotations

import re


def qr_pair(a, b):
    payload_a = a.json("qr", "show")["payload"]
    payload_b = b.json("qr", "show")["payload"]
    a.ok("qr", "scan", payload_b)
    b.ok("qr", "scan", payload_a)
    a.ok("sas", "confirm")
    b.ok("sas", "confirm")


def row(term, name: str) -> str:
    """The row number of `name` in the last table `term` printed."""
    rows = re.findall(rf"^\s+(\d+)\s+{name}\s", term.transcript, re.MULTILINE)
    assert rows, term.transcript
    return rows[-1]


def test_a_roll_call_of_four_devices_and_five_people(people, relay_url):
    ana, ben, cai, dee = (people(n, init=True) for n in ("Ana", "Ben", "Cai", "Dee"))
    qr_pair(ana, ben)
    qr_pair(ana, cai)
    cai.ok("device", "reset", "--yes")

    host = ana.spawn("roll-call", "--relay", relay_url)
    code = host.expect(r"Meeting code: ([2-9A-Z]{4}-[2-9A-Z]{4})").group(1)
    host.expect_exact("everyone else runs: itsme roll-call " + code)
    guests = {p.name: p.spawn("roll-call", code, "--relay", relay_url) for p in (ben, cai, dee)}
    terms = {"Ana": host, **guests}
    # Once all four are in, each screen lists its contacts present.
    host.expect(r"Your contacts here: (Ben, Cai|Cai, Ben); 1 unknown device\.")
    guests["Ben"].expect(r"Your contacts here: Ana; 2 unknown devices\.")
    guests["Cai"].expect(r"Your contacts here: Ana; 2 unknown devices\.")
    guests["Dee"].expect(r"Your contacts here: none; 3 unknown devices\.")
    codes = {}
    for name, term in terms.items():
        term.sendline("yes")
        codes[name] = term.expect(r"Your code: ([A-Z]+ \d{3})\.").group(1)
    # Nothing sealed has left any device yet: typing a code now waits for it.
    guests["Ben"].sendline(f"{row(guests['Ben'], 'Ana')} {codes['Ana']}")
    guests["Ben"].expect_exact("Noted; checked when their sealed code arrives.")
    for term in terms.values():
        term.sendline("said")
    guests["Ben"].expect(r"Ana\s+VERIFIED")
    host.sendline(f"{row(host, 'Ben')} {codes['Ben']}")
    host.expect(r"Ben\s+VERIFIED")
    # A wrong code is wrong; the right one then verifies.
    wrong = "ALFA 000" if not codes["Cai"].startswith("ALFA") else "BRAVO 000"
    host.sendline(f"{row(host, 'Cai')} {wrong}")
    host.expect(r"Cai\s+WRONG CODE")
    host.sendline(f"{row(host, 'Cai')} {codes['Cai']}")
    host.expect(r"Cai\s+verified, but their DEVICE CHANGED")
    guests["Cai"].sendline(f"{row(guests['Cai'], 'Ana')} {codes['Ana']}")
    guests["Cai"].expect(r"Ana\s+verified")
    # The summaries, with Eve, who has no device, in the head count.
    host.sendline("done")
    host.expect_exact("How many people are on the call, you included?")
    host.sendline("5")
    host.expect(r"Verified:\s+Ben")
    host.expect(r"Device changed: Cai")
    host.expect(r"Unknown devices: 1")
    host.expect(r"1 of the 5 people on the call has NO DEVICE in the roll call")
    assert host.finish() == 1
    guests["Ben"].sendline("done")
    guests["Ben"].expect_exact("How many people are on the call, you included?")
    guests["Ben"].sendline("5")
    guests["Ben"].expect(r"Verified:\s+Ana")
    guests["Ben"].expect(r"Unknown devices: 2")
    assert guests["Ben"].finish() == 1
    guests["Dee"].sendline("done")
    guests["Dee"].expect_exact("How many people")
    guests["Dee"].sendline("4")
    guests["Dee"].expect(r"Verified:\s+no one")
    guests["Dee"].expect(r"Everyone on the call \(4\) has a device in the roll call")
    assert guests["Dee"].finish() == 0
    guests["Cai"].sendline("done")
    guests["Cai"].sendline("5")
    assert guests["Cai"].finish() == 1
    # The outcomes are on the contacts.
    states = {c["name"]: c["state"] for c in ana.json("contacts", "list")["contacts"]}
    assert states == {"Ben": "verified", "Cai": "device-changed"}, states


def test_a_bad_meeting_code_is_refused_before_the_relay(people, relay_url):
    ana = people("Ana", init=True)
    result = ana.run("roll-call", "K7X2-M9PN", "--relay", relay_url)
    assert result.returncode == 2 and "typo" in result.stderr, result


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 in front of the relay whose `cut()` drops
    every connection through it at once (a network that fails for a
    moment); new connections go through as before."""

    def __init__(self, upstream_url: str):
        import socket
        import threading
        from urllib.parse import urlsplit

        target = urlsplit(upstream_url)
        self.target = (target.hostname, target.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: list = []
        self.lock = threading.Lock()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self):
        import socket

        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.sockets.clear()


def test_a_device_whose_connection_drops_rejoins_and_keeps_its_place(people, relay_url):
    """PROTOCOL.md 20.7: Ben's connection drops after both said their codes;
    his `itsme roll-call` joins again by itself (a new slot), Ana's round
    comes back, and each verifies the other with the codes already read,
    without confirming again."""
    ana, ben = people("Ana", init=True), people("Ben", init=True)
    qr_pair(ana, ben)
    proxy = CuttingProxy(relay_url)
    host = ana.spawn("roll-call", "--relay", relay_url)
    code = host.expect(r"Meeting code: ([2-9A-Z]{4}-[2-9A-Z]{4})").group(1)
    guest = ben.spawn("roll-call", code, "--relay", proxy.url)
    host.expect(r"Your contacts here: Ben\.")
    guest.expect(r"Your contacts here: Ana\.")
    codes = {}
    for name, term in (("Ana", host), ("Ben", guest)):
        term.sendline("yes")
        codes[name] = term.expect(r"Your code: ([A-Z]+ \d{3})\.").group(1)
        term.sendline("said")
        term.expect_exact("Type what each contact reads")
    proxy.cut()
    # Ana sees Ben leave (a new round), then come back: the round returns.
    host.expect_exact("a new round")
    host.expect(r"Ben\s+not yet\s*\r?\n")
    host.expect_exact("Type what each contact reads")
    assert proxy.accepted >= 2
    host.sendline(f"{row(host, 'Ben')} {codes['Ben']}")
    host.expect(r"Ben\s+VERIFIED")
    guest.sendline(f"{row(guest, 'Ana')} {codes['Ana']}")
    guest.expect(r"Ana\s+VERIFIED")
    assert "the room ended" not in guest.transcript
    for term in (host, guest):
        term.sendline("done")
        term.expect_exact("How many people")
        term.sendline("2")
        assert term.finish() == 0
