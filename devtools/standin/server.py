"""The stand-in: a real HTTP server answering like api.github.com and three CI OIDC issuers.

Requests pass through one pipeline: control endpoints (`/_standin/`) go straight to their
handler; everything else is delayed (latency, faults), possibly faulted, routed, journalled, and
stamped with GitHub's rate-limit headers."""

import copy
import json
import re
import secrets
import socket
import threading
import time
import traceback

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response
from werkzeug.wsgi import LimitedStream

from . import actions, checks, control, git, github, issues, s3
from .auth import credentials
from .http import DOCS_URL, Call, HTTPError, error_response, json_response, status_phrase
from .oidc import OIDC
from .state import Fault, Recorded, World

URL_MAP = Map(
    [
        *github.route.rules,
        *issues.route.rules,
        *git.route.rules,
        *checks.route.rules,
        *actions.route.rules,
        *s3.route.rules,
        *control.route.rules,
    ]
)
CONTROL_PREFIX = "/_standin/"
API_VERSIONS = ("2022-11-28", "2026-03-10")
SECONDARY_LIMIT = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
PRIMARY_RESET_SECONDS = 60
"""How far ahead a faulted primary limit resets; short, so tests that honour it stay quick."""


class _QuietHandler(WSGIRequestHandler):
    """Keeps connections alive, as api.github.com does (werkzeug's own `run_wsgi` closes every
    connection, so each call of a client paid a TCP connect here that it does not pay GitHub, and
    the benchmarks measured the stand-in's connects rather than the relay)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = (
        True  # headers and body are two writes: Nagle would hold the body for the client's delayed ACK (40 ms)
    )
    timeout = 30  # a connection silent this long is closed: an idle client never holds a thread for good

    def log_request(self, *args, **kwargs) -> None:
        pass  # the journal is the access log

    def log_error(self, format: str, *args) -> None:
        if format.startswith("Request timed out"):
            return  # a kept connection left idle for `timeout` is closed, as GitHub closes them: not an error
        super().log_error(format, *args)

    def version_string(self) -> str:
        return "github.com"  # what api.github.com puts in its Server header

    def setup(self) -> None:
        super().setup()
        self.server.standin_connections.add(self.connection)

    def finish(self) -> None:
        self.server.standin_connections.discard(self.connection)
        super().finish()

    def run_wsgi(self) -> None:
        """One request: the body read to its end whatever the app read (so the next request on the
        connection starts where it should), the answer sent whole with its length."""
        environ = self.make_environ()
        body_in = _request_body(environ)
        try:
            status, headers, body = _call_app(self.server.app, environ)
            _drain(body_in)
        except Exception:  # noqa: BLE001 - the stand-in's pipeline already turns its bugs into 500s
            traceback.print_exc()
            status, headers, body = "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")], b"stand-in error"
            self.close_connection = True
        self._answer(environ, status, headers, body)

    def _answer(self, environ, status: str, headers: list, body: bytes) -> None:
        code, _, phrase = status.partition(" ")
        self.send_response(int(code), phrase)
        for name, value in headers:
            self.send_header(name, value)
        framed = any(name.lower() == "content-length" for name, _ in headers)
        if not framed and not (100 <= int(code) < 200 or int(code) in (204, 304)):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if environ["REQUEST_METHOD"] != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()


def _request_body(environ):
    """The request body as a stream that knows its end: a chunked one is already (werkzeug's
    `make_environ`); otherwise the Content-Length bounds it."""
    if not environ.get("wsgi.input_terminated"):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        environ["wsgi.input"] = LimitedStream(environ["wsgi.input"], length)
        environ["wsgi.input_terminated"] = True
    return environ["wsgi.input"]


def _call_app(app, environ) -> tuple[str, list, bytes]:
    answer: dict = {}

    def start_response(status, headers, exc_info=None):
        answer.update(status=status, headers=headers)

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return answer["status"], answer["headers"], body


def _drain(stream) -> None:
    while stream.read(65536):
        pass


def _hang_up(connection) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the client


def _parse_json(body: bytes):
    try:
        return json.loads(body) if body.strip() else None
    except (ValueError, UnicodeDecodeError):
        return None


def _request_id() -> str:
    return ":".join(secrets.token_hex(n).upper() for n in (2, 2, 3, 3)) + f":{int(time.time()):X}"


class StandIn:
    """A local GitHub (REST + App auth) and CI OIDC issuers, over real HTTP on a free port."""

    def __init__(
        self,
        app_id: int = 1001,
        app_private_key_pem: str | None = None,
        client_id: str = "Iv1.sandbox",
        app_slug: str = "crcr-relay",
    ):
        self.world = World(app_id, app_private_key_pem, client_id, app_slug)
        self.oidc = OIDC(self._base_url, self.world.lock)
        self.url: str | None = None
        self._server = self._thread = None

    def _base_url(self) -> str:
        if self.url is None:
            raise RuntimeError("the stand-in has no URL until start() is called")
        return self.url

    @property
    def app_id(self) -> int:
        return self.world.app_id

    @property
    def app_private_key_pem(self) -> str:
        return self.world.app_key.private_pem()

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> "StandIn":
        self._server = make_server(host, port, self, threaded=True, request_handler=_QuietHandler)
        self._server.standin_connections = set()
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else (f"[{host}]" if ":" in host else host)
        self.url = f"http://{shown}:{self._server.server_port}"
        self.world.base_url = self.url
        # A short poll interval keeps stop() quick; tests start and stop many stand-ins.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"standin-{self._server.server_port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        for connection in list(self._server.standin_connections):
            _hang_up(connection)  # a kept-alive connection must not go on answering for a stopped stand-in
        self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> "StandIn":
        return self if self._server else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- the WSGI pipeline -------------------------------------------------------------------------

    def __call__(self, environ, start_response):
        return self._handle(Request(environ))(environ, start_response)

    def _handle(self, request: Request) -> Response:
        arrived, body = time.time(), request.get_data(cache=True)
        if request.path.startswith(CONTROL_PREFIX):
            return self._stamp(self._route(request, body), count=False)
        response = self._simulate(request, body)
        self._record(request, body, response.status_code, arrived)
        is_rest = request.path != "/rate_limit" and not request.path.startswith("/oidc/")
        return self._stamp(response, count=is_rest)

    def _simulate(self, request: Request, body: bytes) -> Response:
        with self.world.lock:
            fault = self.world.take_fault(request.method, request.path)
            delay = self.world.latency + (fault.delay if fault else 0.0)
        if delay > 0:
            time.sleep(delay)  # outside the lock: slow calls must not serialise the others
        if fault is not None and fault.status is not None:
            return self._fault_response(fault, request)
        return self._route(request, body)

    def _route(self, request: Request, body: bytes) -> Response:
        try:
            handler, args = URL_MAP.bind_to_environ(request.environ).match()
        except HTTPException:
            return error_response(404, "Not Found")  # GitHub also says 404 to a wrong method
        try:
            self._check_version(request)
            with self.world.lock:
                return handler(Call(self, request, body), **args)
        except HTTPError as exc:
            return exc.response()
        except Exception as exc:  # a stand-in bug must surface as a loud 500, not a hung test
            traceback.print_exc()
            return error_response(500, f"stand-in error: {exc!r}")

    @staticmethod
    def _check_version(request: Request) -> None:
        version = request.headers.get("X-GitHub-Api-Version")
        if request.path.startswith(("/oidc/", CONTROL_PREFIX)) or version in (None, *API_VERSIONS):
            return
        raise HTTPError(400, f"API version '{version}' is not supported.")

    def _fault_response(self, fault: Fault, request: Request) -> Response:
        headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
        if fault.status in (403, 429) and fault.retry_after is None:
            reset = int(time.time()) + PRIMARY_RESET_SECONDS
            headers.update({"x-ratelimit-remaining": "0", "x-ratelimit-used": "5000", "x-ratelimit-reset": str(reset)})
        headers.update({name: str(value) for name, value in (fault.headers or {}).items()})
        body = fault.body
        if body is None:
            body = {"message": self._fault_message(fault, request), "documentation_url": DOCS_URL}
        if isinstance(body, (dict, list)):
            return json_response(body, fault.status, headers)
        return Response(body, status=fault.status, headers=headers)

    def _fault_message(self, fault: Fault, request: Request) -> str:
        if fault.status not in (403, 429):
            return status_phrase(fault.status)
        if fault.retry_after is not None:
            return SECONDARY_LIMIT
        with self.world.lock:
            grant = self.world.tokens.get(credentials(Call(self, request)) or "")
        return (
            f"API rate limit exceeded for installation ID {grant['installation_id']}."
            if grant
            else "API rate limit exceeded."
        )

    def _record(self, request: Request, body: bytes, status: int, arrived: float) -> None:
        entry = Recorded(
            method=request.method,
            path=request.path,
            query=request.args.to_dict(),
            headers={name.lower(): value for name, value in request.headers.items()},
            body=body,
            json=_parse_json(body),
            status=status,
            at=arrived,
        )
        with self.world.lock:
            self.world.journal.append(entry)

    def _stamp(self, response: Response, count: bool) -> Response:
        with self.world.lock:
            rate = self.world.rate_limit(count)
        stamps = {
            "x-ratelimit-limit": rate["limit"],
            "x-ratelimit-remaining": rate["remaining"],
            "x-ratelimit-used": rate["used"],
            "x-ratelimit-reset": rate["reset"],
            "x-ratelimit-resource": "core",
            "x-github-request-id": _request_id(),
        }
        for name, value in stamps.items():
            if name not in response.headers:  # a fault's own rate-limit headers win
                response.headers[name] = str(value)
        return response

    # --- seeding -----------------------------------------------------------------------------------

    def add_installation(self, installation_id: int, account: str, **options) -> dict:
        with self.world.lock:
            return self.world.add_installation(int(installation_id), account, **options)

    def add_repo(
        self, full_name: str, repo_id: int | None = None, installation_id: int | None = None, **options
    ) -> dict:
        """installation_id=None: the repo exists but the App is not installed on it."""
        with self.world.lock:
            return self.world.add_repo(full_name, repo_id, installation_id, **options)

    def add_commit(
        self, repo: str, sha: str, parents=(), message: str = "", author: str = "octocat", **options
    ) -> dict:
        with self.world.lock:
            return self.world.add_commit(repo, sha, parents, message, author, **options)

    def add_pull(self, repo: str, number: int, head_sha: str, labels=(), state: str = "open", **options) -> dict:
        with self.world.lock:
            return self.world.add_pull(repo, number, head_sha, labels, state, **options)

    def add_file(self, repo: str, path: str, text: str, branch: str = "main", message: str = "") -> str:
        """Commit a file on a branch (created when absent); the new commit's sha."""
        with self.world.lock:
            found = self.world.repo(*repo.split("/", 1))
            return git.commit(self.world, found, branch, {path: text.encode()}, message or f"Update {path}")

    def file_text(self, repo: str, path: str, ref: str = "main") -> str | None:
        with self.world.lock:
            data = git.file_at(self.world, self.world.repo(*repo.split("/", 1)), ref, path)
        return data.decode() if data is not None else None

    def branches(self, repo: str) -> dict[str, str]:
        with self.world.lock:
            return dict(git.git(self.world, self.world.repo(*repo.split("/", 1))).refs)

    def next_pull_number(self, repo: str) -> int:
        with self.world.lock:
            key = repo.lower()
            return max((n for r, n in self.world.pulls if r == key), default=0) + 1

    def close_pull(self, repo: str, number: int, merged: bool = False) -> dict:
        """A person closes (or merges) the pull request on GitHub."""
        with self.world.lock:
            return git.pull_close(self.world, repo, number, merged)

    def add_workflow_run(self, repo: str, head_sha: str, **options):
        """An upstream Actions run with jobs and artifacts (see standin.actions.add_workflow_run)."""
        with self.world.lock:
            return actions.add_workflow_run(self.world, repo, head_sha, **options)

    def s3_url(self, bucket: str = "gha-artifacts") -> str:
        """The base URL of an S3-shaped public bucket served by the stand-in (see standin.s3)."""
        return f"{self._base_url()}/_s3/{bucket}"

    def add_s3_object(self, key: str, data: bytes, bucket: str = "gha-artifacts") -> None:
        with self.world.lock:
            s3.add_object(self.world, bucket, key, data)

    def s3_deny_missing(self, bucket: str = "gha-artifacts") -> None:
        """Missing keys answer 403 AccessDenied, as S3 does where anonymous listing is off."""
        with self.world.lock:
            s3.buckets(self.world).deny_missing.add(bucket)

    def set_run_running(self, repo: str, run_id: int, running: bool = True) -> None:
        with self.world.lock:
            key = (repo.lower(), int(run_id))
            self.world.running.add(key) if running else self.world.running.discard(key)

    def actions_request_token(
        self, repository: str = "sandbox-org/sandbox-backend", repository_id: str = "100001", **claims
    ) -> tuple[str, str]:
        """(ACTIONS_ID_TOKEN_REQUEST_URL, ACTIONS_ID_TOKEN_REQUEST_TOKEN) for a simulated job."""
        with self.world.lock:
            token = control.new_actions_token(
                self.world, {"repository": repository, "repository_id": str(repository_id), **claims}
            )
        return f"{self._base_url()}/_standin/actions/id-token?api-version=2.0", token

    # --- observing ---------------------------------------------------------------------------------

    def _snapshot(self, items):
        with self.world.lock:
            return copy.deepcopy(list(items))

    @property
    def journal(self) -> list[Recorded]:
        with self.world.lock:
            return list(self.world.journal)

    def requests(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        """The journal filtered by method and by a regex that must match the whole path."""
        pattern = re.compile(path) if path is not None else None
        return [
            r
            for r in self.journal
            if (method is None or r.method == method.upper()) and (pattern is None or pattern.fullmatch(r.path))
        ]

    @property
    def dispatches(self) -> list[dict]:
        return self._snapshot(self.world.dispatches)

    @property
    def check_runs(self) -> list[dict]:
        with self.world.lock:
            return self._snapshot(entry["run"] for _, entry in sorted(self.world.check_runs.items()))

    @property
    def comments(self) -> list[dict]:
        with self.world.lock:
            return self._snapshot(comment for _, comment in sorted(self.world.comments.items()))

    @property
    def issues(self) -> list[dict]:
        with self.world.lock:
            return self._snapshot(issue for _, issue in sorted(self.world.issues.items()))

    def pulls(self, repo: str) -> list[dict]:
        """Every pull request of `repo` as GitHub shows it, by number."""
        with self.world.lock:
            found = self.world.repo(*repo.split("/", 1))
            key = found["full_name"].lower()
            return self._snapshot(
                self.world.pull_json(found, p) for (r, _), p in sorted(self.world.pulls.items()) if r == key
            )

    @property
    def reruns(self) -> list[dict]:
        return self._snapshot(self.world.reruns)

    def wait_for(self, predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)

    # --- steering ----------------------------------------------------------------------------------

    def fail(
        self,
        method: str | None,
        path_regex: str,
        status: int | None = 500,
        times: int | None = 1,
        retry_after: int | None = None,
        delay: float = 0.0,
        body=None,
        headers: dict | None = None,
    ) -> None:
        """The next `times` matching requests (None: until clear_faults) answer `status` after `delay`
        seconds; status=None with a delay makes them slow but otherwise normal."""
        fault = Fault(method, re.compile(path_regex), status, times, retry_after, delay, body, dict(headers or {}))
        with self.world.lock:
            self.world.faults.append(fault)

    def clear_faults(self) -> None:
        with self.world.lock:
            self.world.faults = []

    def set_latency(self, seconds: float) -> None:
        with self.world.lock:
            self.world.latency = float(seconds)

    def on_dispatch(self, fn):
        """Call fn(repo, event_type, client_payload) in a new daemon thread after each accepted dispatch."""
        with self.world.lock:
            self.world.dispatch_callbacks.append(fn)
        return fn

    def fire_dispatch(self, record: dict) -> None:
        with self.world.lock:
            callbacks = list(self.world.dispatch_callbacks)
        for fn in callbacks:
            args = (record["repo"], record["event_type"], copy.deepcopy(record["client_payload"]))
            threading.Thread(target=fn, args=args, name="standin-on-dispatch", daemon=True).start()

    def reset(self) -> None:
        """Clear journal, dispatches, check runs, comments, re-runs, running runs, faults, latency
        and the rate-limit count; keep repos, installations, commits, pulls, tokens and keys."""
        with self.world.lock:
            self.world.clear_activity()
