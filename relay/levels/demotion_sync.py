"""Making GitHub agree with a DemotionPullRequest row, one write at a time (the DEMOTION_SYNC
upstream write, relay.checks.outbox). Each sync reads what GitHub has (the PR, main's allowlist,
the branch) and returns the one call that moves it closer: create the branch from main's head,
reset it when main's allowlist moved under it, commit the moved entry, open the PR (or adopt the
one already open for the branch), label it, refresh its title and body; or close it and delete the
branch. A sent call chains the next sync, so the outbox engine's retries, backoff (GitHub's rate
limits honoured) and attempt log cover every step, and a step that failed halfway is simply read
again: the PR is looked up by its branch before one is created, so a retry never opens a second.

A PR found closed without the relay's doing is a person's decision: recorded, and while the repo
still misses a new PR replaces it at once; found merged, it is recorded and left alone."""

import base64
import logging
from dataclasses import dataclass
from urllib.parse import quote

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from relay.github.writes import Plan, Skip
from relay.levels.allowlist_moves import allowlist_demoted
from relay.registry.allowlist import AllowlistError

from ..github import client as github
from ..github.upstream import upstream_installation_id
from ..models import DemotionPullRequest, UpstreamWrite
from . import demotion

logger = logging.getLogger(__name__)
State, Decision = DemotionPullRequest.State, demotion.Decision
MAX_STEPS = 12
"""Calls chained from one decision; a sync that keeps finding work stops here until the next."""


@dataclass(frozen=True)
class File:
    text: str
    sha: str


def demotion_prepare(write: UpstreamWrite) -> Plan | Skip:
    row = DemotionPullRequest.objects.select_related("project").get(pk=write.demotion_id)
    DemotionPullRequest.objects.filter(pk=row.pk).update(synced_at=timezone.now())
    if row.steps >= MAX_STEPS:
        return Skip(f"{MAX_STEPS} calls chained since the last decision; the next one starts again")
    sync = Sync(row, upstream_installation_id())
    if row.state == State.OPEN:
        return sync.open_step()
    if row.state == State.CLOSING:
        return sync.close_step()
    return Skip(f"nothing to do: {row.get_state_display()}")


class Sync:
    def __init__(self, row: DemotionPullRequest, installation_id: int):
        self.row, self.installation_id = row, installation_id
        self.repo, self.base = settings.CRCR_UPSTREAM_REPO, settings.CRCR_ALLOWLIST_BRANCH

    # --- wanted open ------------------------------------------------------------------------------

    def open_step(self) -> Plan | Skip:
        row = self.row
        pull = self.pull() if row.number else None
        if pull is not None and pull.get("state") == "closed":
            return self.closed_on_github(pull)
        if row.number and pull is None:
            self.forget_pull()  # GitHub no longer has it (a deleted repo or a reset stand-in): open it again
        main_sha, main_file = self.ref_sha(self.base), self.file(self.base)
        if main_sha is None or main_file is None:
            raise github.PermanentGitHubError(f"{self.repo} has no {settings.CRCR_ALLOWLIST_PATH} on {self.base}")
        wanted = self.wanted_text(main_file.text)
        if wanted is None:
            return self.moot()
        branch_sha = self.ref_sha(row.branch)
        if branch_sha is None:
            return self.plan(
                "POST",
                f"/repos/{self.repo}/git/refs",
                "branch created",
                {"ref": f"refs/heads/{row.branch}", "sha": main_sha},
            )
        branch_file = self.file(row.branch)
        if branch_file is None or branch_file.text != wanted:
            return self.commit_step(main_sha, main_file, branch_file, wanted)
        if not row.number and not self.adopt():
            return self.create_pull()
        if not row.labelled:
            return self.plan(
                "POST",
                f"/repos/{self.repo}/issues/{row.number}/labels",
                "labelled",
                {"labels": [demotion.LABEL]},
                stored={"labelled": True},
            )
        return self.text_step()

    def wanted_text(self, text: str) -> str | None:
        try:
            return allowlist_demoted(text, self.row.project.full_name, self.row.from_level, self.row.project.device)
        except AllowlistError as exc:
            raise github.PermanentGitHubError(f"main's allowlist cannot be read: {exc}") from exc

    def commit_step(self, main_sha: str, main_file: File, branch_file: File | None, wanted: str) -> Plan:
        """Commit the move on top of main's file; a branch holding anything else (an older move,
        main's file from before it moved) is first reset to main's head."""
        row = self.row
        if branch_file is None or branch_file.sha != main_file.sha:
            path = f"/repos/{self.repo}/git/refs/heads/{quote(row.branch)}"
            return self.plan("PATCH", path, "branch reset to main's head", {"sha": main_sha, "force": True})
        body = {
            "message": f"{demotion.demotion_title(row)}\n\nMissed: {', '.join(demotion.missed_names(row.evidence))}",
            "content": base64.b64encode(wanted.encode()).decode(),
            "sha": main_file.sha,
            "branch": row.branch,
        }
        recommit = row.number is not None
        return self.plan(
            "PUT", self.contents_path(), "allowlist committed", body, after=self.recorded_recommit if recommit else None
        )

    def recorded_recommit(self) -> None:
        demotion.decision_record(self.row, Decision.REFRESHED, "re-committed on main's allowlist, which had moved")

    def create_pull(self) -> Plan:
        row = self.row
        title, body = demotion.demotion_title(row), demotion.demotion_body(row)
        payload = {"title": title, "head": row.branch, "base": self.base, "body": body, "maintainer_can_modify": False}

        def stored(response) -> str:
            data = response.json if isinstance(response.json, dict) else {}
            DemotionPullRequest.objects.filter(pk=row.pk).update(
                number=data.get("number"),
                html_url=str(data.get("html_url") or "")[:500],
                sent_digest=demotion.text_digest(title, body),
            )
            return self.chain(f"PR #{data.get('number')} opened")

        def already_open(exc: github.GitHubError) -> str | None:
            # An earlier try created it and its answer was lost: the next sync adopts it.
            if exc.status == 422 and "already exists" in str(exc):
                return self.chain("a PR for the branch exists already")
            return None

        path = f"/repos/{self.repo}/pulls"
        return Plan("POST", path, self.installation_id, payload, on_sent=stored, on_error=already_open)

    def forget_pull(self) -> None:
        fields = {"number": None, "html_url": "", "labelled": False, "sent_digest": ""}
        DemotionPullRequest.objects.filter(pk=self.row.pk).update(**fields)
        for name, value in fields.items():
            setattr(self.row, name, value)

    def adopt(self) -> bool:
        owner = self.repo.split("/")[0]
        path = f"/repos/{self.repo}/pulls?state=open&head={quote(f'{owner}:{self.row.branch}')}&base={quote(self.base)}"
        found = github.as_installation(self.installation_id, "GET", path).json or []
        if not found:
            return False
        self.row.number, self.row.html_url = found[0]["number"], str(found[0].get("html_url") or "")[:500]
        DemotionPullRequest.objects.filter(pk=self.row.pk).update(number=self.row.number, html_url=self.row.html_url)
        return True

    def text_step(self) -> Plan | Skip:
        row = self.row
        title, body = demotion.demotion_title(row), demotion.demotion_body(row)
        digest = demotion.text_digest(title, body)
        if digest == row.sent_digest:
            return Skip(f"PR #{row.number} is up to date")
        path = f"/repos/{self.repo}/pulls/{row.number}"
        return self.plan(
            "PATCH", path, "body refreshed", {"title": title, "body": body}, stored={"sent_digest": digest}, chain=False
        )

    # --- wanted closed ----------------------------------------------------------------------------

    def close_step(self) -> Plan | Skip:
        row = self.row
        pull = self.pull() if row.number else None
        if pull is not None and pull.get("merged"):
            return self.merged()
        if pull is not None and pull.get("state") == "open":
            body = demotion.closing_note(row) + (pull.get("body") or "")
            path = f"/repos/{self.repo}/pulls/{row.number}"
            return self.plan("PATCH", path, f"PR #{row.number} closed", {"state": "closed", "body": body[:60000]})
        if self.ref_sha(row.branch) is not None:
            return self.plan("DELETE", f"/repos/{self.repo}/git/refs/heads/{quote(row.branch)}", "branch deleted", None)
        DemotionPullRequest.objects.filter(pk=row.pk, state=State.CLOSING).update(
            state=State.CLOSED, closed_at=timezone.now()
        )
        return Skip("closed and its branch deleted")

    # --- found on GitHub --------------------------------------------------------------------------

    def closed_on_github(self, pull: dict) -> Skip:
        """Wanted open, found closed: merged, or a person closed it while the repo still misses
        (then a new PR replaces it, and the next sync opens it)."""
        if pull.get("merged"):
            return self.merged()
        row, by = self.row, _closer(pull)
        with transaction.atomic():
            if not DemotionPullRequest.objects.filter(pk=row.pk, state=State.OPEN).update(
                state=State.CLOSED_BY_HAND, closed_at=timezone.now()
            ):
                return Skip("the row moved on meanwhile")
            demotion.decision_record(row, Decision.CLOSED_BY_HAND, f"PR #{row.number} was closed by {by}", by=by)
            successor = self.successor()
        return Skip(
            f"PR #{row.number} closed by {by}" + (f"; replaced by demotion row {successor.pk}" if successor else "")
        )

    def successor(self) -> DemotionPullRequest | None:
        row = self.row
        try:
            with transaction.atomic():
                new = DemotionPullRequest.objects.create(
                    project=row.project,
                    from_level=row.from_level,
                    to_level=row.to_level,
                    branch=row.branch,
                    evidence=row.evidence,
                    replaces=row,
                )
        except IntegrityError:
            return None
        demotion.decision_record(new, Decision.REOPENED, f"still misses after PR #{row.number} was closed by hand")
        demotion.sync_enqueue(new)
        return new

    def merged(self) -> Skip:
        row = self.row
        if DemotionPullRequest.objects.filter(pk=row.pk, state__in=DemotionPullRequest.ACTIVE_STATES).update(
            state=State.MERGED, closed_at=timezone.now()
        ):
            demotion.decision_record(row, Decision.MERGED, f"PR #{row.number} was merged", by="a person on GitHub")
        return Skip(f"PR #{row.number} is merged")

    def moot(self) -> Skip:
        """Main's allowlist no longer lists the repo at the level the PR moves it from."""
        row = self.row
        if DemotionPullRequest.objects.filter(pk=row.pk, state=State.OPEN).update(state=State.CLOSING):
            note = f"{settings.CRCR_ALLOWLIST_PATH} on {self.base} no longer lists it at {row.from_level}"
            demotion.decision_record(row, Decision.CLOSED_MOOT, note)
            demotion.sync_enqueue(row)
        return Skip("moot: closing")

    # --- GitHub reads and plans ----------------------------------------------------------------------

    def get(self, path: str) -> dict | None:
        try:
            return github.as_installation(self.installation_id, "GET", path).json
        except github.PermanentGitHubError as exc:
            if exc.status == 404:
                return None
            raise

    def pull(self) -> dict | None:
        return self.get(f"/repos/{self.repo}/pulls/{self.row.number}")

    def ref_sha(self, branch: str) -> str | None:
        found = self.get(f"/repos/{self.repo}/git/ref/heads/{quote(branch)}")
        return ((found or {}).get("object") or {}).get("sha")

    def contents_path(self) -> str:
        return f"/repos/{self.repo}/contents/{quote(settings.CRCR_ALLOWLIST_PATH)}"

    def file(self, ref: str) -> File | None:
        found = self.get(f"{self.contents_path()}?ref={quote(ref, safe='')}")
        if not isinstance(found, dict) or found.get("type", "file") != "file":
            return None
        return File(base64.b64decode(found.get("content") or "").decode(), found.get("sha", ""))

    def plan(self, method, path, note, body, *, stored=None, after=None, chain=True) -> Plan:
        """One write; once sent, `stored` is saved on the row, `after` runs, and the next sync is
        chained (unless this was the last step)."""
        row = self.row

        def on_sent(response) -> str:
            if stored:
                DemotionPullRequest.objects.filter(pk=row.pk).update(**stored)
            if after:
                after()
            return self.chain(note) if chain else note

        return Plan(method, path, self.installation_id, body, on_sent=on_sent)

    def chain(self, note: str) -> str:
        DemotionPullRequest.objects.filter(pk=self.row.pk).update(steps=self.row.steps + 1)
        demotion.sync_enqueue(self.row)
        return note


def _closer(pull: dict) -> str:
    who = (pull.get("closed_by") or {}).get("login")
    return f"@{who}" if who else "a person on GitHub"
