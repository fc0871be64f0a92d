"""Everything the stand-in remembers, behind one lock, and the GitHub JSON shapes built from it."""

import base64
import itertools
import re
import secrets
import string
import threading
import time
import zlib
from dataclasses import dataclass, field

from .http import HTTPError, iso
from .keys import SigningKey

HEX40 = re.compile(r"[0-9a-f]{40}")
TOKEN_ALPHABET = string.ascii_letters + string.digits
TOKEN_LIFETIME = 3600
"""Installation tokens live one hour on GitHub."""
DEFAULT_PERMISSIONS = {
    "actions": "write",
    "checks": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}
APP_EVENTS = ["check_run", "check_suite", "installation", "pull_request", "push"]


def unsigned() -> dict:
    """A commit's `verification` as GitHub gives it for an unsigned commit."""
    return {"verified": False, "reason": "unsigned", "signature": None, "payload": None, "verified_at": None}


def node_id(kind: str, number: int) -> str:
    # The legacy global id format ("010:Repository123" base64), good enough to be opaque.
    raw = f"0{len(kind):02d}:{kind}{number}"
    return base64.b64encode(raw.encode()).decode()


@dataclass
class Recorded:
    """One request as the stand-in saw it, with the status it answered."""

    method: str
    path: str
    query: dict
    headers: dict
    body: bytes
    json: object
    status: int
    at: float

    def summary(self, index: int) -> dict:
        fields = ("method", "path", "query", "status", "json", "at")
        return {"index": index, **{name: getattr(self, name) for name in fields}}


@dataclass
class Fault:
    method: str | None
    pattern: re.Pattern
    status: int | None
    times: int | None
    retry_after: int | None = None
    delay: float = 0.0
    body: object = None
    headers: dict = field(default_factory=dict)

    def matches(self, method: str, path: str) -> bool:
        method_ok = self.method in (None, "*") or self.method.upper() == method.upper()
        return method_ok and self.pattern.fullmatch(path) is not None


IDS_EPOCH = 1_767_225_600
"""2026-01-01T00:00:00Z: where ids_unique_across_restarts starts counting milliseconds."""


def ids_unique_across_restarts(floor: int) -> itertools.count:
    """Ids for what the stand-in creates while it runs (check runs, suites, comments, workflow runs
    and jobs). A sandbox started again on its old database keeps the relay's rows, whose check-run
    and comment ids are unique, while the stand-in starts empty: counting from the same number
    each time, its first check run collided with the last run's and the relay could not store it.
    Each process starts a thousand ids above every millisecond since IDS_EPOCH, where no earlier
    process can have reached (none creates a thousand objects a millisecond)."""
    milliseconds = (time.time_ns() // 1_000_000) - IDS_EPOCH * 1000
    return itertools.count(floor + milliseconds * 1000 + 1)


class World:
    """State of the fake GitHub. Callers hold `lock` (an RLock) around every read and write."""

    def __init__(
        self,
        app_id: int,
        app_private_key_pem: str | None = None,
        client_id: str = "Iv1.sandbox",
        app_slug: str = "crcr-relay",
    ):
        self.lock = threading.RLock()
        self.app_id, self.client_id, self.app_slug = app_id, client_id, app_slug
        self.app_key = SigningKey(app_private_key_pem)
        self.base_url = ""
        self.installations: dict[int, dict] = {}
        self.repos: dict[str, dict] = {}
        self.commits: dict[str, dict[str, dict]] = {}
        self.pulls: dict[tuple[str, int], dict] = {}
        self.tokens: dict[str, dict] = {}
        self.actions_tokens: dict[str, dict] = {}
        self.owner_ids: dict[str, int] = {}
        self.suites: dict[tuple[str, str], int] = {}
        # Ids above 2**31 so a relay storing them in 32-bit columns fails in tests, not production.
        self.check_run_ids = ids_unique_across_restarts(30_000_000_000)
        self.suite_ids = ids_unique_across_restarts(20_000_000_000)
        self.comment_ids = ids_unique_across_restarts(2_500_000_000)
        self.repo_ids = itertools.count(900_000_001)
        self.owner_id_seq = itertools.count(80_000_001)
        self.dispatch_callbacks: list = []
        self.clear_activity()

    def clear_activity(self) -> None:
        """Forget what happened (requests, writes, faults), keep what exists (repos, keys, tokens)."""
        self.journal: list[Recorded] = []
        self.dispatches: list[dict] = []
        self.check_runs: dict[int, dict] = {}
        self.comments: dict[int, dict] = {}
        self.issues: dict[tuple[str, int], dict] = {}
        self.reruns: list[dict] = []
        self.running: set[tuple[str, int]] = set()
        self.faults: list[Fault] = []
        self.latency = 0.0
        self.window_start, self.used = time.time(), 0

    # --- rate limit ---------------------------------------------------------------------------

    def rate_limit(self, count: bool) -> dict:
        """The core bucket after this request; the hour window restarts like GitHub's."""
        now = time.time()
        if now >= self.window_start + 3600:
            self.window_start, self.used = now, 0
        self.used += 1 if count else 0
        reset = int(self.window_start + 3600)
        return {
            "limit": 5000,
            "used": self.used,
            "remaining": max(0, 5000 - self.used),
            "reset": reset,
            "resource": "core",
        }

    # --- faults --------------------------------------------------------------------------------

    def take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(method, path) and (fault.times is None or fault.times > 0):
                if fault.times is not None:
                    fault.times -= 1
                self.faults = [f for f in self.faults if f.times is None or f.times > 0]
                return fault
        return None

    # --- owners, installations, repos ----------------------------------------------------------

    def owner_id(self, login: str, wanted: int | None = None) -> int:
        key = login.lower()
        if wanted is not None:
            self.owner_ids[key] = wanted
        return self.owner_ids.setdefault(key, next(self.owner_id_seq))

    def account_json(self, login: str, kind: str = "Organization") -> dict:
        number = self.owner_id(login)
        return {
            "login": login,
            "id": number,
            "node_id": node_id("Organization", number),
            "type": kind,
            "html_url": f"https://github.com/{login}",
            "site_admin": False,
        }

    def add_installation(
        self,
        installation_id: int,
        account: str,
        account_id: int | None = None,
        account_type: str = "Organization",
        permissions: dict | None = None,
        repository_selection: str = "selected",
    ) -> dict:
        self.owner_id(account, account_id)
        self.installations[installation_id] = {
            "id": installation_id,
            "account": account,
            "account_type": account_type,
            "permissions": dict(permissions or DEFAULT_PERMISSIONS),
            "repository_selection": repository_selection,
            "created_at": iso(),
        }
        return self.installation_json(self.installations[installation_id])

    def installation_json(self, inst: dict) -> dict:
        number, account = inst["id"], self.account_json(inst["account"], inst["account_type"])
        return {
            "id": number,
            "node_id": node_id("Installation", number),
            "account": account,
            "app_id": self.app_id,
            "app_slug": self.app_slug,
            "client_id": self.client_id,
            "target_id": account["id"],
            "target_type": inst["account_type"],
            "repository_selection": inst["repository_selection"],
            "access_tokens_url": f"{self.base_url}/app/installations/{number}/access_tokens",
            "repositories_url": f"{self.base_url}/installation/repositories",
            "html_url": f"https://github.com/organizations/{inst['account']}/settings/installations/{number}",
            "permissions": dict(inst["permissions"]),
            "events": list(APP_EVENTS),
            "created_at": inst["created_at"],
            "updated_at": inst["created_at"],
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "suspended_by": None,
            "suspended_at": None,
        }

    def installation(self, installation_id) -> dict:
        try:
            return self.installations[int(installation_id)]
        except (KeyError, ValueError):
            raise HTTPError(404, "Not Found") from None

    def add_repo(
        self,
        full_name: str,
        repo_id: int | None = None,
        installation_id: int | None = None,
        private: bool = False,
        default_branch: str = "main",
    ) -> dict:
        owner = full_name.split("/")[0]
        if installation_id is not None and installation_id not in self.installations:
            self.add_installation(installation_id, owner)
        old = self.repos.get(full_name.lower(), {})
        self.repos[full_name.lower()] = {
            "id": repo_id or old.get("id") or next(self.repo_ids),
            "full_name": full_name,
            "installation_id": installation_id,
            "private": private,
            "default_branch": default_branch,
        }
        return self.repo_json(self.repos[full_name.lower()])

    def ensure_repo(self, full_name: str) -> dict:
        """Repos named by add_commit/add_pull spring into existence, not installed."""
        if full_name.lower() not in self.repos:
            self.add_repo(full_name)
        return self.repos[full_name.lower()]

    def repo(self, owner: str, name: str) -> dict:
        repo = self.repos.get(f"{owner}/{name}".lower())
        if repo is None:
            raise HTTPError(404, "Not Found")
        return repo

    def repo_json(self, repo: dict) -> dict:
        owner, name = repo["full_name"].split("/", 1)
        return {
            "id": repo["id"],
            "node_id": node_id("Repository", repo["id"]),
            "name": name,
            "full_name": repo["full_name"],
            "private": repo["private"],
            "owner": self.account_json(owner),
            "html_url": f"https://github.com/{repo['full_name']}",
            "url": f"{self.base_url}/repos/{repo['full_name']}",
            "default_branch": repo["default_branch"],
            "visibility": "private" if repo["private"] else "public",
        }

    def installation_repos(self, installation_id: int, repo_ids: set | None = None) -> list[dict]:
        repos = [r for r in self.repos.values() if r["installation_id"] == installation_id]
        return sorted((r for r in repos if repo_ids is None or r["id"] in repo_ids), key=lambda r: r["id"])

    # --- installation tokens -------------------------------------------------------------------

    def mint_token(self, installation_id: int, permissions: dict, repo_ids: set | None) -> dict:
        token = "ghs_" + "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(36))
        grant = {
            "token": token,
            "installation_id": installation_id,
            "expires_at": time.time() + TOKEN_LIFETIME,
            "permissions": permissions,
            "repo_ids": repo_ids,
        }
        self.tokens[token] = grant
        return grant

    def grant(self, token: str | None) -> dict:
        grant = self.tokens.get(token or "")
        if grant is None or grant["expires_at"] <= time.time():
            raise HTTPError(401, "Bad credentials")
        return grant

    def covers(self, grant: dict, repo: dict) -> bool:
        if repo["installation_id"] != grant["installation_id"]:
            return False
        return grant["repo_ids"] is None or repo["id"] in grant["repo_ids"]

    # --- commits and pulls ---------------------------------------------------------------------

    def add_commit(
        self, full_name: str, sha: str, parents=(), message: str = "", author: str = "octocat", date: str | None = None
    ) -> dict:
        repo = self.ensure_repo(full_name)
        commit = {
            "sha": sha.lower(),
            "parents": [p.lower() for p in parents],
            "message": message,
            "author": author,
            "date": date or iso(),
        }
        self.commits.setdefault(repo["full_name"].lower(), {})[commit["sha"]] = commit
        return self.commit_json(repo, commit)

    def resolve_sha(self, repo: dict, ref: str) -> str | None:
        """A registered full sha or unique prefix (>= 7 hex) of one; None when unknown."""
        commits, ref = self.commits.get(repo["full_name"].lower(), {}), ref.lower()
        if ref in commits:
            return ref
        if len(ref) >= 7 and re.fullmatch(r"[0-9a-f]+", ref):
            found = [sha for sha in commits if sha.startswith(ref)]
            return found[0] if len(found) == 1 else None
        return None

    def commit_json(self, repo: dict, commit: dict) -> dict:
        full, sha = repo["full_name"], commit["sha"]
        person = {
            "name": commit["author"],
            "email": f"{commit['author']}@users.noreply.github.com",
            "date": commit["date"],
        }
        user = {"login": commit["author"], "id": self.owner_id(commit["author"]), "type": "User"}
        parents = [
            {
                "sha": p,
                "url": f"{self.base_url}/repos/{full}/commits/{p}",
                "html_url": f"https://github.com/{full}/commit/{p}",
            }
            for p in commit["parents"]
        ]
        return {
            "sha": sha,
            "node_id": node_id("Commit", int(sha[:12], 16)),
            "url": f"{self.base_url}/repos/{full}/commits/{sha}",
            "html_url": f"https://github.com/{full}/commit/{sha}",
            "comments_url": f"{self.base_url}/repos/{full}/commits/{sha}/comments",
            "commit": {
                "message": commit["message"],
                "author": person,
                "committer": dict(person),
                "tree": {"sha": sha, "url": f"{self.base_url}/repos/{full}/git/trees/{sha}"},
                "comment_count": 0,
                "verification": unsigned(),
            },
            "author": user,
            "committer": dict(user),
            "parents": parents,
            "stats": {"total": 0, "additions": 0, "deletions": 0},
            "files": [],
        }

    def add_pull(
        self,
        full_name: str,
        number: int,
        head_sha: str,
        labels=(),
        state: str = "open",
        draft: bool = False,
        merged: bool = False,
        title: str | None = None,
        user: str = "contributor",
        head_ref: str | None = None,
        base_ref: str = "main",
        base_sha: str | None = None,
        head_repo: str | None = None,
    ) -> dict:
        repo = self.ensure_repo(full_name)
        self.pulls[(repo["full_name"].lower(), int(number))] = {
            "number": int(number),
            "head_sha": head_sha.lower(),
            "labels": list(labels),
            "state": state,
            "draft": draft,
            "merged": merged,
            "title": title or f"Pull request #{number}",
            "user": user,
            "head_ref": head_ref or f"{user}/pr-{number}",
            "base_ref": base_ref,
            "base_sha": base_sha or "0" * 40,
            "head_repo": head_repo or repo["full_name"],
            "created_at": iso(),
        }
        return self.pull_json(repo, self.pulls[(repo["full_name"].lower(), int(number))])

    def pull_json(self, repo: dict, pull: dict) -> dict:
        full, number = repo["full_name"], pull["number"]
        user = {"login": pull["user"], "id": self.owner_id(pull["user"]), "type": "User"}
        head_repo = self.repos.get(pull["head_repo"].lower())
        head_repo_json = self.repo_json(head_repo) if head_repo else {"full_name": pull["head_repo"]}
        return {
            "id": repo["id"] * 1000 + number,
            "node_id": node_id("PullRequest", repo["id"] * 1000 + number),
            "number": number,
            "state": pull["state"],
            "draft": pull["draft"],
            "merged": pull["merged"],
            "merge_commit_sha": None,
            "title": pull["title"],
            "user": user,
            "labels": [
                {"id": zlib.crc32(name.encode()), "name": name, "color": "ededed", "default": False}
                for name in pull["labels"]
            ],
            "head": {
                "label": f"{pull['head_repo'].split('/')[0]}:{pull['head_ref']}",
                "ref": pull["head_ref"],
                "sha": pull["head_sha"],
                "repo": head_repo_json,
            },
            "base": {
                "label": f"{full.split('/')[0]}:{pull['base_ref']}",
                "ref": pull["base_ref"],
                "sha": pull["base_sha"],
                "repo": self.repo_json(repo),
            },
            "body": pull.get("body"),
            "html_url": f"https://github.com/{full}/pull/{number}",
            "url": f"{self.base_url}/repos/{full}/pulls/{number}",
            "created_at": pull["created_at"],
            "updated_at": pull["created_at"],
            "closed_at": pull.get("closed_at"),
            "merged_at": pull.get("merged_at"),
            "author_association": "CONTRIBUTOR",
        }

    def pull_refs(self, repo: dict, head_sha: str) -> list[dict]:
        """What check runs list under pull_requests: same-repo PRs only (forks never show)."""
        key = repo["full_name"].lower()
        pulls = [p for (r, _), p in self.pulls.items() if r == key and p["head_sha"] == head_sha]
        return [self._pull_ref(repo, p) for p in pulls if p["head_repo"].lower() == key]

    def _pull_ref(self, repo: dict, pull: dict) -> dict:
        brief = {
            "id": repo["id"],
            "url": f"{self.base_url}/repos/{repo['full_name']}",
            "name": repo["full_name"].split("/")[1],
        }
        return {
            "id": repo["id"] * 1000 + pull["number"],
            "number": pull["number"],
            "url": f"{self.base_url}/repos/{repo['full_name']}/pulls/{pull['number']}",
            "head": {"ref": pull["head_ref"], "sha": pull["head_sha"], "repo": brief},
            "base": {"ref": pull["base_ref"], "sha": pull["base_sha"], "repo": brief},
        }

    # --- the App itself ------------------------------------------------------------------------

    def app_json(self) -> dict:
        return {
            "id": self.app_id,
            "slug": self.app_slug,
            "client_id": self.client_id,
            "node_id": node_id("App", self.app_id),
            "owner": self.account_json("pytorch"),
            "name": "CRCR Relay",
            "description": "Cross-repository CI relay (local stand-in)",
            "external_url": self.base_url,
            "html_url": f"https://github.com/apps/{self.app_slug}",
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "permissions": dict(DEFAULT_PERMISSIONS),
            "events": list(APP_EVENTS),
            "installations_count": len(self.installations),
        }

    def app_brief(self) -> dict:
        app = self.app_json()
        return {name: app[name] for name in ("id", "slug", "node_id", "name", "owner", "html_url", "client_id")}

    def bot_user(self) -> dict:
        login = f"{self.app_slug}[bot]"
        return {
            "login": login,
            "id": self.owner_id(login),
            "type": "Bot",
            "html_url": f"https://github.com/apps/{self.app_slug}",
        }

    def suite_id(self, repo: dict, head_sha: str) -> int:
        key = (repo["full_name"].lower(), head_sha)
        if key not in self.suites:
            self.suites[key] = next(self.suite_ids)
        return self.suites[key]
