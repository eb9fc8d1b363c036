#!/usr/bin/env python3
"""approval_service: a tiny web service whose users approve their logins on
their phones (docs/PROTOCOL.md section 19), and a demo that runs it.

The service speaks JSON over HTTP (the standard library's http.server, on
127.0.0.1):

    POST /enroll/start  {"user"}                         -> {"service_id", "nonce"}
    POST /enroll/finish {"user", "nonce", "enrollment"}  -> {"credential_id", "label"}
    POST /login/start   {"user", "scopes": [...]}        -> {"session_id", "request", "otp"}
    POST /login/finish  {"session_id", "approval"}       -> {"decision", "granted_scopes", "credential_id"}

Bytes travel as lowercase hex.  Errors are {"error": <class name>,
"message": ...} with a 4xx status.  The service keeps, on its side, every
value it checks against: the enrollment nonces it issued (single use, with
an expiry), the exact bytes of each login request (by session ID), the keys
each user enrolled (several devices per user), and the answered requests
(a ReplayStore, here backed by a dict through a callback).

main() starts the service on a thread and plays two devices of one user:

    PYTHONPATH=bindings/python python3 examples/python/approval_service.py
"""

import json
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, ClassVar, Dict, Iterable, List, Mapping, Tuple, TypedDict, Union

try:
    import itsme
except Exception as error:  # the library is missing or cannot run here
    sys.exit(f"{sys.argv[0]}: cannot load libitsme: {error}")

SERVICE_ID = "bank.example"
SERVICE_NAME = "Example Bank"
REQUEST_LIFETIME = 120  # seconds a login request lives
NONCE_LIFETIME = 300  # seconds an enrollment nonce stays good
BODY_MAX = 16384  # the largest request body the service reads

# A request body as the service received it: a JSON object whose every value
# is checked before it is used.
Request = Mapping[str, object]


# The answers of the four operations, as listed above; an ErrorAnswer for a refusal.
class EnrollStartAnswer(TypedDict):
    service_id: str
    nonce: str


class EnrollFinishAnswer(TypedDict):
    credential_id: str
    label: str


class LoginStartAnswer(TypedDict):
    session_id: str
    request: str
    otp: str


class LoginFinishAnswer(TypedDict):
    decision: str
    granted_scopes: List[str]
    credential_id: str


class ErrorAnswer(TypedDict):
    error: str
    message: str


Answer = Union[EnrollStartAnswer, EnrollFinishAnswer, LoginStartAnswer, LoginFinishAnswer]


def now() -> int:
    return int(time.time())


# -- the service -----------------------------------------------------------------------------


class ServiceError(Exception):
    """A refusal of the service itself; the class name is the "error"."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ServiceError):
    status = 400


class UnknownUser(ServiceError):
    status = 404


class UnknownNonce(ServiceError):
    status = 404


class UnknownSession(ServiceError):
    status = 404


class NoDeviceEnrolled(ServiceError):
    status = 409


# The status for each refusal of the library; any other failure of it is 500.
LIBRARY_STATUS = (
    (itsme.InvalidArgumentError, 400),
    (itsme.MalformedMessageError, 400),
    (itsme.AuthenticationFailedError, 403),
    (itsme.NotFoundError, 403),  # signed by a key the user did not enroll
    (itsme.ReplayedError, 409),
    (itsme.ExpiredError, 410),
    (itsme.LockedError, 503),  # the replay store is full
)


def library_status(error: itsme.ItsMeError) -> int:
    return next((status for cls, status in LIBRARY_STATUS if isinstance(error, cls)), 500)


class ApprovalService:
    """The service's state and its four operations, each taking and
    returning a dict.  Thread-safe: the HTTP server runs each request on a
    thread of its own."""

    def __init__(
        self,
        users: Iterable[str],
        service_id: str = SERVICE_ID,
        service_name: str = SERVICE_NAME,
        clock: Callable[[], int] = now,
    ) -> None:
        self.service_id = service_id
        self.service_name = service_name
        self.clock = clock
        self._lock = threading.Lock()
        # user -> {credential ID: Credential}
        self._credentials: Dict[str, Dict[bytes, itsme.Credential]] = {user: {} for user in users}
        self._nonces: Dict[bytes, Tuple[str, int]] = {}  # enrollment nonce -> (user, expires)
        self._sessions: Dict[str, Tuple[str, bytes, int]] = {}  # session ID -> (user, request bytes, expires_at)
        # The replay store: a dict behind a lock, reached through the callback
        # form (a real service would use a database table or a shared cache).
        self._spent: Dict[bytes, int] = {}  # replay key -> expires_at
        self._spent_lock = threading.Lock()
        self.replay = itsme.ReplayStore.from_callback(self._replay_insert)

    def close(self) -> None:
        self.replay.close()

    def _replay_insert(self, key: bytes, expires_at: int, clock: int) -> bool:
        """Records `key` until `expires_at`; True if it was there already.
        Atomic: one lock around the check and the insert."""
        with self._spent_lock:
            for old in [k for k, until in self._spent.items() if until < clock]:
                del self._spent[old]  # expired: the library refuses those requests anyway
            if key in self._spent:
                return True
            self._spent[key] = expires_at
            return False

    # -- reading a request --------------------------------------------------

    @staticmethod
    def _text(body: Request, name: str) -> str:
        value = body.get(name)
        if not isinstance(value, str) or not value:
            raise BadRequest(f'"{name}" must be a non-empty string')
        return value

    @classmethod
    def _hex(cls, body: Request, name: str) -> bytes:
        value = cls._text(body, name)
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise BadRequest(f'"{name}" must be hex') from None

    def _user(self, body: Request) -> str:
        user = self._text(body, "user")
        if user not in self._credentials:
            raise UnknownUser(f"no user {user!r}")
        return user

    def _sweep(self, clock: int) -> None:
        """Forgets nonces past their expiry, and sessions a minute after
        theirs (until then a late answer is told it expired)."""
        for nonce in [n for n, (_, until) in self._nonces.items() if until < clock]:
            del self._nonces[nonce]
        for session in [s for s, (_, _, until) in self._sessions.items() if until + 60 < clock]:
            del self._sessions[session]

    # -- the operations ---------------------------------------------------------

    def enroll_start(self, body: Request) -> EnrollStartAnswer:
        nonce = secrets.token_bytes(32)
        with self._lock:
            user = self._user(body)
            self._sweep(self.clock())
            self._nonces[nonce] = (user, self.clock() + NONCE_LIFETIME)
        return {"service_id": self.service_id, "nonce": nonce.hex()}

    def enroll_finish(self, body: Request) -> EnrollFinishAnswer:
        nonce = self._hex(body, "nonce")
        enrollment = self._hex(body, "enrollment")
        with self._lock:
            user = self._user(body)
            self._sweep(self.clock())
            issued = self._nonces.get(nonce)
            if issued is None or issued[0] != user:
                raise UnknownNonce("no such enrollment nonce for this user (each is good once)")
            del self._nonces[nonce]  # spent, whatever the outcome
        # Checked against our own service ID and the nonce we issued.
        credential = itsme.verify_enrollment(self.service_id, nonce, enrollment)
        with self._lock:
            self._credentials[user][credential.credential_id] = credential
        return {"credential_id": credential.credential_id.hex(), "label": credential.label}

    def login_start(self, body: Request) -> LoginStartAnswer:
        scopes = body.get("scopes", [])
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise BadRequest('"scopes" must be a list of strings')
        with self._lock:
            user = self._user(body)
            if not self._credentials[user]:
                raise NoDeviceEnrolled(f"{user!r} has no device enrolled")
        session_id = secrets.token_urlsafe(24)
        clock = self.clock()
        request = itsme.create_approval_request(
            self.service_id, self.service_name, session_id, scopes, REQUEST_LIFETIME, clock
        )
        shown = itsme.ApprovalRequest.parse(request, clock)
        with self._lock:
            self._sweep(clock)
            self._sessions[session_id] = (user, request, shown.expires_at)
        return {"session_id": session_id, "request": request.hex(), "otp": shown.otp}

    def login_finish(self, body: Request) -> LoginFinishAnswer:
        session_id = self._text(body, "session_id")
        approval = self._hex(body, "approval")
        with self._lock:
            self._sweep(self.clock())
            session = self._sessions.get(session_id)
            if session is None:
                raise UnknownSession("no such login session")
            user, request, _ = session
            keys = [credential.public_key for credential in self._credentials[user].values()]
        # Our own request bytes, the user's keys, our clock: nothing read
        # from the client but the approval itself.
        result = itsme.verify_approval(request, approval, keys, self.replay, self.clock())
        return {
            "decision": result.decision.name.lower(),
            "granted_scopes": list(result.granted_scopes),
            "credential_id": result.credential_id.hex(),
        }

    def routes(self) -> Dict[str, Callable[[Request], Answer]]:
        return {
            "/enroll/start": self.enroll_start,
            "/enroll/finish": self.enroll_finish,
            "/login/start": self.login_start,
            "/login/finish": self.login_finish,
        }


class Handler(BaseHTTPRequestHandler):
    """JSON in, JSON out; every failure is a JSON error, never a traceback."""

    service: ClassVar[ApprovalService]  # set on a subclass by serve()

    def _answer(self, status: int, value: Union[Answer, ErrorAnswer]) -> None:
        data = json.dumps(value).encode("utf-8")
        self.send_response(status)
        if status == 405:
            self.send_header("Allow", "POST")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._answer(status, {"error": kind, "message": message})

    def do_POST(self) -> None:
        operation = self.service.routes().get(self.path)
        if operation is None:
            self._error(404, "NotFound", f"no route {self.path}")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(411, "LengthRequired", "send a Content-Length")
            return
        if not 0 <= length <= BODY_MAX:
            self._error(413, "TooLarge", f"a body is at most {BODY_MAX} bytes")
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except (UnicodeDecodeError, ValueError):
            self._error(400, "BadRequest", "the body must be a JSON object")
            return
        try:
            self._answer(200, operation(body))
        except ServiceError as error:
            self._error(error.status, type(error).__name__, error.message)
        except itsme.ItsMeError as error:
            self._error(library_status(error), type(error).__name__, str(error))
        except Exception as error:  # a bug: say so, without a traceback
            print(f"approval service: internal error: {type(error).__name__}: {error}", file=sys.stderr)
            self._error(500, "InternalError", "the service failed")

    def _not_allowed(self) -> None:
        self._error(405, "MethodNotAllowed", "use POST")

    do_GET = do_HEAD = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the demo prints what matters
        pass


def serve(service: ApprovalService, port: int = 0) -> ThreadingHTTPServer:
    """Starts `service` on 127.0.0.1:`port` (0: any free port) on a thread;
    returns the server (its URL is http://127.0.0.1:<server.server_port>)."""
    handler = type("ServiceHandler", (Handler,), {"service": service})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="approval-service", daemon=True).start()
    return server


# -- the demo: a browser and two devices -------------------------------------------------------


class Unexpected(Exception):
    """The demo saw something it should not have."""


# What the demo posts: a JSON object, or raw bytes (for a malformed body).
Body = Union[Mapping[str, object], bytes]


def call(base: str, path: str, body: Body) -> Tuple[int, Any]:
    """POSTs `body` (a dict, or raw bytes) to the service: (status, JSON answer).

    The answer is as json.loads gives it (Any): each caller names the
    answer it expects (an EnrollStartAnswer, an ErrorAnswer...)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(base + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def ok(base: str, path: str, body: Body) -> Any:
    status, answer = call(base, path, body)
    if status != 200:
        raise Unexpected(f"{path} answered {status}: {answer}")
    return answer


def refused(base: str, path: str, body: Body, status: int, kind: str) -> ErrorAnswer:
    got, answer = call(base, path, body)
    error: ErrorAnswer = answer
    if (got, error.get("error")) != (status, kind) or not error.get("message"):
        raise Unexpected(f"{path}: expected {status} {kind}, got {got} {error}")
    return error


def enroll_device(base: str, user: str, device: itsme.SecretStore, label: str) -> str:
    """The device enrolls with the service: a fresh key for this service only."""
    start: EnrollStartAnswer = ok(base, "/enroll/start", {"user": user})
    enrollment = itsme.enroll(device, start["service_id"], label, bytes.fromhex(start["nonce"]))
    finish: EnrollFinishAnswer = ok(
        base, "/enroll/finish", {"user": user, "nonce": start["nonce"], "enrollment": enrollment.hex()}
    )
    if finish["credential_id"] != itsme.credential_id(device, start["service_id"]).hex():
        raise Unexpected("the service stored another credential ID than the device holds")
    print(f"Enrolled {label!r} for {user}: credential {finish['credential_id']}")
    # The nonce was spent: the same enrollment again is refused.
    refused(base, "/enroll/finish", {"user": user, "nonce": start["nonce"], "enrollment": enrollment.hex()},
            404, "UnknownNonce")
    return finish["credential_id"]


def show_on_device(device: itsme.SecretStore, login: LoginStartAnswer) -> Tuple[bytes, itsme.ApprovalRequest]:
    """The device reads the request and the person compares the OTPs."""
    request = bytes.fromhex(login["request"])
    shown = itsme.ApprovalRequest.parse(request, now())
    itsme.credential_id(device, shown.service_id)  # enrolled there (else NotFoundError)
    print(f"Service: {shown.service_name} ({shown.service_id}) OTP on the device: {shown.otp} "
          f"OTP on the screen: {login['otp']}")
    if shown.otp != login["otp"]:
        raise Unexpected("the OTPs differ: the person would deny")
    print(f"Requested scopes: {' '.join(shown.scopes) or '(none)'}; {shown.expires_at - now()} s left")
    return request, shown


def demo(base: str) -> None:
    with itsme.SecretStore.memory() as phone, itsme.SecretStore.memory() as tablet:
        phone_id = enroll_device(base, "alice", phone, "Alice's phone")
        tablet_id = enroll_device(base, "alice", tablet, "Alice's tablet")
        print("Reusing a spent enrollment nonce: refused (UnknownNonce)")

        # A login asking for three scopes; Alice grants two on her phone.
        login: LoginStartAnswer = ok(
            base, "/login/start", {"user": "alice", "scopes": ["profile", "email", "payments"]}
        )
        request, shown = show_on_device(phone, login)
        approval = itsme.sign_approval(phone, request, itsme.ApprovalDecision.APPROVE, ["email", "profile"], now())
        result: LoginFinishAnswer = ok(
            base, "/login/finish", {"session_id": login["session_id"], "approval": approval.hex()}
        )
        print(f"Login result: {result['decision']}, granted {' '.join(result['granted_scopes'])}, "
              f"by credential {result['credential_id']}")
        if (result["decision"], result["granted_scopes"], result["credential_id"]) != (
                "approve", ["email", "profile"], phone_id):
            raise Unexpected(f"unexpected result {result}")

        # The same approval again: the request was answered already.
        again = refused(base, "/login/finish", {"session_id": login["session_id"], "approval": approval.hex()},
                        409, "ReplayedError")
        print(f"Posting the same approval again: refused ({again['error']}: {again['message']})")

        # A login asking for email and profile: the device will not grant payments.
        login = ok(base, "/login/start", {"user": "alice", "scopes": ["email", "profile"]})
        request, _ = show_on_device(tablet, login)
        try:
            itsme.sign_approval(tablet, request, itsme.ApprovalDecision.APPROVE, ["payments"], now())
        except itsme.InvalidArgumentError as error:
            print(f"Granting a scope that was not requested: refused on the device ({type(error).__name__})")
        else:
            raise Unexpected("the device signed a scope that was not requested")
        # Alice denies it on her tablet instead; the service learns she refused.
        denial = itsme.sign_approval(tablet, request, itsme.ApprovalDecision.DENY, [], now())
        result = ok(base, "/login/finish", {"session_id": login["session_id"], "approval": denial.hex()})
        print(f"Login result: {result['decision']}, by credential {result['credential_id']}")
        if (result["decision"], result["granted_scopes"], result["credential_id"]) != ("deny", [], tablet_id):
            raise Unexpected(f"unexpected result {result}")

        # An answer to one login posted for another: refused (another OTP or nonce).
        first: LoginStartAnswer = ok(base, "/login/start", {"user": "alice", "scopes": []})
        second: LoginStartAnswer = ok(base, "/login/start", {"user": "alice", "scopes": []})
        request, _ = show_on_device(phone, first)
        answer = itsme.sign_approval(phone, request, itsme.ApprovalDecision.APPROVE, [], now())
        wrong = call(base, "/login/finish", {"session_id": second["session_id"], "approval": answer.hex()})
        if wrong[0] != 403 or wrong[1].get("error") != "AuthenticationFailedError":
            raise Unexpected(f"an answer to another login was not refused: {wrong}")
        print(f"An approval posted for another login: refused ({wrong[1]['error']})")
        # ...and it spent nothing: posted for its own login it still works.
        result = ok(base, "/login/finish", {"session_id": first["session_id"], "approval": answer.hex()})
        if result["decision"] != "approve":
            raise Unexpected("the real answer was not accepted after a refused one")

    # What a careless or hostile client gets: clean JSON errors.
    bad_requests: Tuple[Tuple[str, Body, int, str], ...] = (
        ("/login/start", b"{not json", 400, "BadRequest"),
        ("/login/start", {"user": "mallory", "scopes": []}, 404, "UnknownUser"),
        ("/login/start", {"user": "bob", "scopes": []}, 409, "NoDeviceEnrolled"),
        ("/login/start", {"user": "alice", "scopes": "email"}, 400, "BadRequest"),
        ("/login/start", {"user": "alice", "scopes": ["e mail"]}, 400, "InvalidArgumentError"),
        ("/login/finish", {"session_id": "nope", "approval": "00"}, 404, "UnknownSession"),
        ("/login/finish", {"session_id": login["session_id"], "approval": "zz"}, 400, "BadRequest"),
        ("/login/finish", {"session_id": login["session_id"], "approval": "01"}, 400, "MalformedMessageError"),
        ("/enroll/finish", {"user": "alice", "nonce": "00" * 32, "enrollment": "00"}, 404, "UnknownNonce"),
        ("/nowhere", {}, 404, "NotFound"),
    )
    for path, body, status, kind in bad_requests:
        refused(base, path, body, status, kind)
        print(f"{path} with a bad request: {status} {kind}")


def main() -> int:
    service = ApprovalService(users=["alice", "bob"])
    server = serve(service)
    base = f"http://127.0.0.1:{server.server_port}"
    print(f"Service {SERVICE_NAME} ({SERVICE_ID}) listening on {base}")
    try:
        demo(base)
    except (Unexpected, itsme.ItsMeError, OSError, ValueError, KeyError) as error:
        print(f"approval service example: FAILED: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    finally:
        server.shutdown()
        server.server_close()
        service.close()
    print("approval service example: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
