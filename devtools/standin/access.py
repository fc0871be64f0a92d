"""Which repository a request may touch, decided the way GitHub decides for installation tokens."""

from .auth import installation_grant
from .http import Call, HTTPError

FORBIDDEN = "Resource not accessible by integration"


def target(
    call: Call, owner: str, name: str, permission: str, hidden_status: int = 403, alternative: str | None = None
) -> dict:
    """The repository a write goes to. Outside the token's installation a public repo answers
    `hidden_status` (dispatches say 404, most writes 403) and a private one always 404."""
    world = call.standin.world
    grant = installation_grant(call)
    repo = world.repo(owner, name)
    if not world.covers(grant, repo):
        status = 404 if repo["private"] else hidden_status
        raise HTTPError(status, "Not Found" if status == 404 else FORBIDDEN)
    levels = {grant["permissions"].get(permission), grant["permissions"].get(alternative or permission)}
    if not levels & {"write", "admin"}:
        raise HTTPError(403, FORBIDDEN)
    return repo


def readable(call: Call, owner: str, name: str) -> dict:
    """A repository to read: public ones with any valid token (or none), private ones only in scope."""
    world = call.standin.world
    grant = installation_grant(call, required=False)
    repo = world.repo(owner, name)
    if repo["private"] and (grant is None or not world.covers(grant, repo)):
        raise HTTPError(404, "Not Found")
    return repo
