"""Stand-in CI OIDC issuers (GitHub Actions, Buildkite, GitLab) and token minting.

Each kind is its own issuer under the stand-in's URL, with discovery and a JWKS that always
publishes two keys, so the relay's key lookup, rotation and negative cases run against real
HTTP the way they do against token.actions.githubusercontent.com."""

import hashlib
import threading
import time
import uuid

from .keys import SigningKey, encode_jwt

KINDS = ("github", "buildkite", "gitlab")
DEFAULT_AUDIENCE = "pytorch-cross-repo-ci-relay"
DEFAULT_SHA = hashlib.sha1(b"standin downstream head").hexdigest()

GITHUB_CLAIMS = [
    "sub",
    "aud",
    "exp",
    "iat",
    "iss",
    "jti",
    "nbf",
    "ref",
    "sha",
    "repository",
    "repository_id",
    "repository_owner",
    "repository_owner_id",
    "run_id",
    "run_number",
    "run_attempt",
    "actor",
    "actor_id",
    "workflow",
    "workflow_ref",
    "workflow_sha",
    "head_ref",
    "base_ref",
    "event_name",
    "ref_type",
    "environment",
    "environment_node_id",
    "job_workflow_ref",
    "job_workflow_sha",
    "repository_visibility",
    "runner_environment",
]
BUILDKITE_CLAIMS = [
    "sub",
    "aud",
    "exp",
    "iat",
    "iss",
    "jti",
    "nbf",
    "organization_slug",
    "pipeline_slug",
    "build_number",
    "build_branch",
    "build_tag",
    "build_commit",
    "step_key",
    "job_id",
    "agent_id",
    "build_source",
    "runner_environment",
    "organization_id",
    "pipeline_id",
]
GITLAB_CLAIMS = [
    "sub",
    "aud",
    "exp",
    "iat",
    "iss",
    "jti",
    "nbf",
    "namespace_id",
    "namespace_path",
    "project_id",
    "project_path",
    "user_id",
    "user_login",
    "user_email",
    "pipeline_id",
    "pipeline_source",
    "job_id",
    "ref",
    "ref_type",
    "ref_path",
    "ref_protected",
    "runner_id",
    "runner_environment",
    "sha",
    "project_visibility",
    "ci_config_ref_uri",
    "ci_config_sha",
]


def _stable_uuid(name: str) -> str:
    # Deterministic so a relay registry seeded once keeps matching tokens minted later.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://standin.invalid/{name}"))


class Issuer:
    """One issuer: a current signing key plus the previous one, both published."""

    def __init__(self, kind: str, base_url, lock):
        self.kind, self._base_url, self._lock = kind, base_url, lock
        self._current = self._previous = self._stranger = None

    @property
    def url(self) -> str:
        return f"{self._base_url()}/oidc/{self.kind}"

    @property
    def jwks_uri(self) -> str:
        # GitLab publishes its keys at its own path; GitHub and Buildkite at /.well-known/jwks.
        suffix = "/oauth/discovery/keys" if self.kind == "gitlab" else "/.well-known/jwks"
        return self.url + suffix

    def key(self, which: str = "current") -> SigningKey:
        """Keys are generated on first use: 2048-bit RSA costs tens of ms and most tests need none."""
        with self._lock:
            if self._current is None:
                self._current, self._previous = SigningKey(), SigningKey()
            if which == "unknown":
                self._stranger = self._stranger or SigningKey()
                return self._stranger
            if which not in ("current", "previous"):
                raise ValueError(f"key must be current, previous or unknown, not {which!r}")
            return self._current if which == "current" else self._previous

    def rotate(self) -> None:
        with self._lock:
            self.key()
            self._previous, self._current = self._current, SigningKey()

    def jwks(self) -> dict:
        return {"keys": [self.key("current").jwk(), self.key("previous").jwk()]}

    def discovery(self) -> dict:
        claims = {"github": GITHUB_CLAIMS, "buildkite": BUILDKITE_CLAIMS, "gitlab": GITLAB_CLAIMS}[self.kind]
        return {
            "issuer": self.url,
            "jwks_uri": self.jwks_uri,
            "subject_types_supported": ["public", "pairwise"],
            "response_types_supported": ["id_token"],
            "claims_supported": claims,
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid"],
        }


def github_defaults(claims: dict) -> dict:
    """GitHub Actions claims for a repository_dispatch run; ids and counters are strings."""
    repo = claims.get("repository", "sandbox-org/sandbox-backend")
    ref, sha = claims.get("ref", "refs/heads/main"), claims.get("sha", DEFAULT_SHA)
    workflow_ref = f"{repo}/.github/workflows/crcr.yml@{ref}"
    return {
        "sub": f"repo:{repo}:ref:{ref}",
        "repository": repo,
        "repository_id": "100001",
        "repository_owner": repo.split("/")[0],
        "repository_owner_id": "200001",
        "repository_visibility": "public",
        "actor": "crcr-relay[bot]",
        "actor_id": "300001",
        "run_id": "400001",
        "run_number": "1",
        "run_attempt": "1",
        "workflow": "crcr",
        "workflow_ref": workflow_ref,
        "workflow_sha": sha,
        "job_workflow_ref": workflow_ref,
        "job_workflow_sha": sha,
        "ref": ref,
        "ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
        "sha": sha,
        "event_name": "repository_dispatch",
        "head_ref": "",
        "base_ref": "",
        "runner_environment": "github-hosted",
    }


def buildkite_defaults(claims: dict) -> dict:
    org = claims.get("organization_slug", "sandbox-org")
    pipeline = claims.get("pipeline_slug", "sandbox-backend")
    branch, commit = claims.get("build_branch", "main"), claims.get("build_commit", DEFAULT_SHA)
    step = claims.get("step_key", "crcr")
    return {
        "sub": f"organization:{org}:pipeline:{pipeline}:ref:refs/heads/{branch}:commit:{commit}:step:{step}",
        "organization_slug": org,
        "pipeline_slug": pipeline,
        "organization_id": _stable_uuid(f"buildkite/{org}"),
        "pipeline_id": _stable_uuid(f"buildkite/{org}/{pipeline}"),
        "build_number": 1,
        "build_branch": branch,
        "build_commit": commit,
        "step_key": step,
        "job_id": str(uuid.uuid4()),
        "agent_id": _stable_uuid("buildkite/agent"),
        "build_source": "api",
        "runner_environment": "self-hosted",
    }


def gitlab_defaults(claims: dict) -> dict:
    project = claims.get("project_path", "sandbox-group/sandbox-backend")
    ref, sha = claims.get("ref", "main"), claims.get("sha", DEFAULT_SHA)
    ref_type = claims.get("ref_type", "branch")
    ref_path = f"refs/{'tags' if ref_type == 'tag' else 'heads'}/{ref}"
    return {
        "sub": f"project_path:{project}:ref_type:{ref_type}:ref:{ref}",
        "namespace_id": "4001",
        "namespace_path": project.rsplit("/", 1)[0],
        "project_id": "4002",
        "project_path": project,
        "project_visibility": "public",
        "user_id": "4003",
        "user_login": "sandbox-user",
        "user_email": "sandbox-user@example.com",
        "pipeline_id": "5001",
        "pipeline_source": "trigger",
        "job_id": "6001",
        "ref": ref,
        "ref_type": ref_type,
        "ref_path": ref_path,
        "ref_protected": "true",
        "runner_id": 7001,
        "runner_environment": "gitlab-hosted",
        "sha": sha,
        "ci_config_ref_uri": f"gitlab.com/{project}//.gitlab-ci.yml@{ref_path}",
        "ci_config_sha": sha,
    }


DEFAULTS = {"github": github_defaults, "buildkite": buildkite_defaults, "gitlab": gitlab_defaults}
NBF_BACKDATE = {"github": 600, "buildkite": 0, "gitlab": 0}
"""GitHub backdates nbf by ten minutes; Buildkite and GitLab set it to iat."""


class OIDC:
    """The three issuers of one stand-in, reachable as `standin.oidc`."""

    def __init__(self, base_url, lock=None):
        """`lock` is the stand-in's one RLock, so key rotation and minting never interleave."""
        lock = lock or threading.RLock()
        self._issuers = {kind: Issuer(kind, base_url, lock) for kind in KINDS}

    def get(self, kind: str) -> Issuer:
        if kind not in self._issuers:
            raise ValueError(f"unknown OIDC kind {kind!r}; expected one of {KINDS}")
        return self._issuers[kind]

    def issuer(self, kind: str = "github") -> str:
        return self.get(kind).url

    def issuers_config(self) -> list[dict]:
        """Exactly the shape of the relay's CRCR_OIDC_ISSUERS setting."""
        return [{"issuer": i.url, "kind": i.kind, "jwks_uri": i.jwks_uri} for i in self._issuers.values()]

    def rotate(self, kind: str = "github") -> None:
        self.get(kind).rotate()

    def claims(self, kind: str, audience: str, lifetime: int, omit=(), **claims) -> dict:
        """The payload `mint` signs: kind-shaped defaults, then `claims`, minus `omit`."""
        now = int(time.time())
        base = {
            "iss": self.get(kind).url,
            "aud": audience,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "nbf": now - NBF_BACKDATE[kind],
            "exp": now + lifetime,
        }
        payload = {**base, **DEFAULTS[kind](claims), **claims}
        return {name: value for name, value in payload.items() if name not in set(omit)}

    def mint(
        self,
        kind="github",
        audience=DEFAULT_AUDIENCE,
        lifetime=300,
        key="current",
        alg="RS256",
        headers=None,
        omit=(),
        **claims,
    ) -> str:
        """A token from `kind`'s issuer; `key`/`alg`/`headers` build the negative cases."""
        issuer = self.get(kind)
        signing_key = issuer.key(key)
        header = {"typ": "JWT", "alg": alg, "kid": signing_key.kid, **(headers or {})}
        header = {name: value for name, value in header.items() if value is not None}
        payload = self.claims(kind, audience, lifetime, omit, **claims)
        if alg == "RS256":
            return encode_jwt(header, payload, key=signing_key)
        if alg == "HS256":
            # The classic confusion attack: HMAC keyed with the published public key.
            return encode_jwt(header, payload, hmac_secret=issuer.key("current").public_pem())
        if alg == "none":
            return encode_jwt(header, payload)
        raise ValueError(f"alg must be RS256, HS256 or none, not {alg!r}")
