"""Request builders and a light HTTP client for load generation, with client-side timing.

The client is one keep-alive HTTP/1.1 connection per thread over a plain socket, not httpx nor
http.client: on a 2-core machine the load generator shares the CPU with the server it measures
(client thread CPU per 21 KB POST, measured on this machine: httpx ~0.7 ms, http.client
~0.3-0.45 ms, `Client` ~0.23 ms). Each figure reports the generator's own CPU per request
(details.cpu_ms_per_request.bench) next to the server's."""

import hashlib
import hmac
import json
import socket
import time
import uuid
from dataclasses import dataclass, field

UPSTREAM = "pytorch/pytorch"
UPSTREAM_ID = 65600975
PAYLOAD_BYTES = 20 * 1024


# --- statistics ------------------------------------------------------------------------------------


def percentile(values, q: float) -> float | None:
    """Linear interpolation between closest ranks (q in 0..100)."""
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def median(values) -> float | None:
    return percentile(values, 50)


def ms(seconds: float | None, digits: int = 2) -> float | None:
    return None if seconds is None else round(seconds * 1000, digits)


# --- HTTP ----------------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: bytes
    seconds: float
    error: str = ""

    def json(self) -> dict:
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return {}


class Client:
    """One keep-alive HTTP/1.1 connection over a plain socket; reconnects after the server closes it.

    Written here rather than taken from http.client: on a 2-core machine the load generator shares
    the CPU with the server it measures, and http.client parsed every answer's headers with
    email.parser. With this client the generator's CPU per callback (8 clients, PostgreSQL) went
    from 0.22 to 0.13 ms (docs/performance.md, "fifth round"). It speaks what the benchmark's
    servers answer: a Content-Length or chunked body, or one closed by the server; an interim 1xx
    answer is read past. A request is sent again only when the connection closed before its answer
    began (a kept connection the server had just closed): one closed inside its answer was
    processed, and is an error reply."""

    def __init__(self, base_url: str, timeout: float = 30.0):
        host, _, port = base_url.removeprefix("http://").rstrip("/").partition(":")
        self.host, self.port, self.timeout = host, int(port or 80), timeout
        self.sock: socket.socket | None = None
        self.buffer = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        return sock

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> Reply:
        message = self._message(method, path, body, headers or {})
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                if self.sock is None:
                    self.sock = self._connect()
                self.sock.sendall(message)
                status, answer_headers, data = self._answer(method)
                if answer_headers.get("connection", "").lower() == "close":
                    self.close()
                return Reply(status, data, time.perf_counter() - started)
            except (RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # A keep-alive connection the server had just closed: retry once on a fresh one.
                self.close()
                if attempt == 2:
                    return Reply(0, b"", time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
            except (OSError, ValueError) as exc:
                self.close()
                return Reply(0, b"", time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
        raise AssertionError("unreachable")

    def _message(self, method: str, path: str, body: bytes | None, headers: dict) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    def _answer(self, method: str) -> tuple[int, dict, bytes]:
        """(status, headers by lower-case name, body) of the next answer on the connection, past
        at most MAX_INTERIM interim answers (100 Continue, 103 Early Hints)."""
        for interim in range(MAX_INTERIM + 1):
            status, headers = self._head(first=interim == 0)
            if not 100 <= status < 200 or status == 101:
                return status, headers, self._body(method, status, headers)
        raise ValueError(f"more than {MAX_INTERIM} interim answers")

    def _head(self, first: bool) -> tuple[int, dict]:
        """(status, headers by lower-case name); `first`: the head that begins the answer, where a
        closed connection means the request was never read."""
        head = self._until(b"\r\n\r\n", first=first)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        version, code, *_ = status_line.split(" ", 2)
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(code), headers

    def _body(self, method: str, status: int, headers: dict) -> bytes:
        if method == "HEAD" or status in (101, 204, 304):
            return b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return self._chunked()
        if "content-length" in headers:
            return self._exactly(int(headers["content-length"]))
        headers["connection"] = "close"  # its end is the connection's
        return self._rest()

    def _receive(self) -> bytes:
        data = self.sock.recv(262144)
        if not data:
            raise RemoteDisconnected("the server closed the connection")
        return data

    def _until(self, marker: bytes, first: bool = False) -> bytes:
        while (at := self.buffer.find(marker)) == -1:
            if len(self.buffer) > MAX_LINE_BYTES:
                raise ValueError(f"no {marker!r} within {MAX_LINE_BYTES} bytes of the answer")
            try:
                self.buffer += self._receive()
            except RemoteDisconnected:
                if first and not self.buffer:
                    raise
                raise _Truncated("the answer ended early") from None
        found, self.buffer = self.buffer[:at], self.buffer[at + len(marker) :]
        return found

    def _exactly(self, size: int) -> bytes:
        chunks, have = [self.buffer], len(self.buffer)
        while have < size:
            try:
                data = self._receive()
            except RemoteDisconnected:
                raise _Truncated("the answer ended early") from None
            chunks.append(data)
            have += len(data)
        joined = b"".join(chunks)
        self.buffer = joined[size:]
        return joined[:size]

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size = int(self._until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                while self._until(b"\r\n"):  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self._exactly(size))
            self._until(b"\r\n")

    def _rest(self) -> bytes:
        chunks = [self.buffer]
        while True:
            try:
                chunks.append(self._receive())
            except RemoteDisconnected:
                self.buffer = b""
                return b"".join(chunks)

    def get(self, path: str, headers: dict | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
                self.buffer = b""


MAX_INTERIM = 8
MAX_LINE_BYTES = 1 << 20
"""The most an answer's head (or a chunk's size line) may take before its end: our servers send a
few hundred bytes; a longer one is an error reply, not an unbounded read."""


class RemoteDisconnected(ConnectionError):
    """The server closed the connection before an answer began: the request may be sent again."""


class _Truncated(ValueError):
    """The server closed the connection inside an answer: the request was processed, so it is not
    sent again (a callback's token would be used twice, a webhook delivered twice)."""


def wait_http(base_url: str, path: str = "/healthz", timeout: float = 60.0, alive=lambda: True) -> float:
    """Seconds until the server answers anything; raises TimeoutError (or if `alive()` turns False)."""
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server at {base_url} exited while starting")
        client = Client(base_url, timeout=5)
        try:
            reply = client.get(path)
            if reply.status:
                return time.monotonic() - started
        finally:
            client.close()
        time.sleep(0.2)
    raise TimeoutError(f"{base_url}{path} did not answer within {timeout:.0f} s")


# --- webhooks ------------------------------------------------------------------------------------------


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _user(login: str, number: int) -> dict:
    base = f"https://api.github.com/users/{login}"
    return {
        "login": login,
        "id": number,
        "node_id": f"MDQ6VXNlcj{number}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{number}?v=4",
        "gravatar_id": "",
        "url": base,
        "html_url": f"https://github.com/{login}",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": "User",
        "user_view_type": "public",
        "site_admin": False,
    }


def _repo() -> dict:
    api = f"https://api.github.com/repos/{UPSTREAM}"
    repo = {
        "id": UPSTREAM_ID,
        "node_id": "MDEwOlJlcG9zaXRvcnk2NTYwMDk3NQ==",
        "name": "pytorch",
        "full_name": UPSTREAM,
        "private": False,
        "owner": _user("pytorch", 21003710),
        "html_url": f"https://github.com/{UPSTREAM}",
        "description": "Tensors and Dynamic neural networks in Python with strong GPU acceleration",
        "fork": False,
        "url": api,
        "created_at": "2016-08-13T05:26:41Z",
        "updated_at": "2026-12-02T10:00:00Z",
        "pushed_at": "2026-12-02T10:40:00Z",
        "git_url": f"git://github.com/{UPSTREAM}.git",
        "ssh_url": f"git@github.com:{UPSTREAM}.git",
        "clone_url": f"https://github.com/{UPSTREAM}.git",
        "homepage": "https://pytorch.org",
        "size": 1093402,
        "stargazers_count": 93000,
        "watchers_count": 93000,
        "language": "Python",
        "forks_count": 25000,
        "open_issues_count": 16000,
        "default_branch": "main",
        "visibility": "public",
        "topics": ["deep-learning", "gpu", "machine-learning", "neural-network", "python"],
    }
    for name in (
        "forks",
        "keys",
        "collaborators",
        "teams",
        "hooks",
        "issue_events",
        "events",
        "assignees",
        "branches",
        "tags",
        "blobs",
        "git_tags",
        "git_refs",
        "trees",
        "statuses",
        "languages",
        "stargazers",
        "contributors",
        "subscribers",
        "subscription",
        "commits",
        "git_commits",
        "comments",
        "issue_comment",
        "contents",
        "compare",
        "merges",
        "archive",
        "downloads",
        "issues",
        "pulls",
        "milestones",
        "notifications",
        "labels",
        "releases",
        "deployments",
    ):
        repo[f"{name}_url"] = f"{api}/{name}"
    return repo


def pr_payload(number: int, head_sha: str, action: str = "synchronize", labels=(), size: int = PAYLOAD_BYTES) -> bytes:
    """A `pull_request` webhook body shaped like GitHub's, padded (in the PR description) to `size` bytes."""
    api = f"https://api.github.com/repos/{UPSTREAM}"
    repo = _repo()
    author = _user("contributor", 1000 + number % 5000)
    pr = {
        "url": f"{api}/pulls/{number}",
        "id": 2_000_000_000 + number,
        "node_id": f"PR_kwDOA-j9z86{number}",
        "number": number,
        "html_url": f"https://github.com/{UPSTREAM}/pull/{number}",
        "diff_url": f"https://github.com/{UPSTREAM}/pull/{number}.diff",
        "patch_url": f"https://github.com/{UPSTREAM}/pull/{number}.patch",
        "issue_url": f"{api}/issues/{number}",
        "state": "open",
        "locked": False,
        "title": f"[inductor] Fix lowering for aten.addmm on privateuse1 (#{number})",
        "user": author,
        "body": "",
        "created_at": "2026-12-01T09:00:00Z",
        "updated_at": "2026-12-02T10:40:00Z",
        "closed_at": None,
        "merged_at": None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [_user("reviewer", 77)],
        "requested_teams": [],
        "labels": [
            {"id": 5_000_000 + i, "name": name, "color": "ededed", "default": False}
            for i, name in enumerate(("open source", *labels))
        ],
        "milestone": None,
        "draft": False,
        "commits_url": f"{api}/pulls/{number}/commits",
        "review_comments_url": f"{api}/pulls/{number}/comments",
        "comments_url": f"{api}/issues/{number}/comments",
        "statuses_url": f"{api}/statuses/{head_sha}",
        "head": {
            "label": f"contributor:fix-{number}",
            "ref": f"fix-{number}",
            "sha": head_sha,
            "user": author,
            "repo": repo,
        },
        "base": {"label": "pytorch:main", "ref": "main", "sha": "0" * 39 + "1", "user": repo["owner"], "repo": repo},
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "active_lock_reason": None,
        "merged": False,
        "mergeable": None,
        "rebaseable": None,
        "mergeable_state": "unknown",
        "merged_by": None,
        "comments": 3,
        "review_comments": 1,
        "maintainer_can_modify": True,
        "commits": 2,
        "additions": 41,
        "deletions": 7,
        "changed_files": 3,
    }
    payload = {
        "action": action,
        "number": number,
        "pull_request": pr,
        "repository": repo,
        "sender": author,
        "installation": {"id": 4_200_000, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDIwMDAwMA=="},
    }
    if action == "synchronize":
        payload.update({"before": "f" * 40, "after": head_sha})
    base = json.dumps(payload, separators=(",", ":")).encode()
    filler = max(0, size - len(base))
    pr["body"] = ("Fixes the lowering; adds a test. " * (filler // 33 + 1))[:filler]
    return json.dumps(payload, separators=(",", ":")).encode()


def webhook_headers(event: str, body: bytes, secret: str, delivery_id: str | None = None) -> dict:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body, secret),
        "X-GitHub-Hook-ID": "292430182",
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "User-Agent": "GitHub-Hookshot/044aadd",
    }


def head_sha(*parts) -> str:
    return hashlib.sha1(":".join(str(p) for p in parts).encode()).hexdigest()


# --- callbacks -------------------------------------------------------------------------------------------


@dataclass
class CallbackJob:
    """One downstream job: an in_progress and a completed callback, each with its own token."""

    prefix: bytes  # the echoed client_payload up to (and including) `"workflow":`
    repo: str
    run_id: str
    job_name: str
    conclusion: str
    tokens: list = field(default_factory=list)
    modules: int = 0
    """How many upstream test modules its completion counts (`workflow.module_counts`); 0: none,
    as the callbacks benchmark sends (the goal-5 A/B of devtools/bench/cost.py sends them)."""

    def body(self, status: str) -> bytes:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        workflow = {
            "schema_version": "1",
            "status": status,
            "conclusion": self.conclusion if status == "completed" else None,
            "name": "crcr-bench",
            "url": f"https://github.com/{self.repo}/actions/runs/{self.run_id}",
            "run_attempt": "1",
            "job_name": self.job_name,
            "check_run_id": f"{self.run_id}1",
            "run_id": self.run_id,
            "started_at": now if status == "in_progress" else None,
            "completed_at": now if status == "completed" else None,
        }
        if status == "completed":
            failed = 3 if self.conclusion == "failure" else 0
            workflow["test_results"] = {"passed": 4210 - failed, "failed": failed, "skipped": 113, "total": 4323}
            workflow["environment"] = {"runner": "linux.bench.2", "driver": "24.1", "torch_backend": "privateuse1"}
            if failed:
                workflow["failed_tests"] = [
                    {
                        "name": f"test_out_addmm_privateuse1_float{bits}",
                        "classname": "TestCommonPRIVATEUSE1",
                        "file": "test/test_ops.py",
                        "message": "AssertionError: Tensor-likes are not close!",
                        "stacktrace": "Traceback (most recent call last):\n  ...",
                    }
                    for bits in (16, 32, 64)
                ]
            if self.modules:
                workflow["module_counts"] = module_counts(self.modules, failed)
        return self.prefix + json.dumps(workflow, separators=(",", ":")).encode() + b"}"


def module_counts(modules: int, failed: int) -> dict:
    """`workflow.module_counts` as our client sends it for a job that ran `modules` upstream test
    files (PyTorch's test/ holds about 1,100): each counts passes and skips, the first `failed`
    one failure each."""
    return {
        f"test/{'distributed/' if k % 9 == 0 else ''}test_module_{k:04d}.py": {
            "passed": 40 + k % 300,
            "skipped": k % 7,
            **({"failed": 1} if k < failed else {}),
        }
        for k in range(modules)
    }


def callback_prefix(event_type: str, delivery_id: str, payload_json: bytes, callback_token: str) -> bytes:
    head = json.dumps({"event_type": event_type, "delivery_id": delivery_id}, separators=(",", ":"))[:-1].encode()
    return (
        head
        + b',"payload":'
        + payload_json
        + b',"callback_token":'
        + json.dumps(callback_token).encode()
        + b',"workflow":'
    )
