"""The merge gate as a check run: one `crcr/gate` per PR head SHA, summarising the L4 backends.
Branch protection can require this one stable name. The verdict is relay.results.gate's (the API
and the HUD's PR page give the same); this module writes it upstream: its body and Markdown."""

from django.conf import settings

from relay.github.markdown import md_code
from relay.policy.links import pr_path, public_url, short_sha
from relay.policy.verdicts import PASSING, Gate, State

from ..results.gate import GATE_NAME, gate_verdict

__all__ = ["GATE_NAME", "gate_body", "gate_summary"]
GLYPHS = {Gate.SUCCESS: "✅", Gate.FAILURE: "❌", Gate.PENDING: "⏳", Gate.SKIPPED: "⚪"}


def gate_summary(verdict: dict) -> str:
    """Markdown: one row per L4 backend, then the policy in one line."""
    lines = [f"Merge gate for `{short_sha(verdict['head_sha'])}`: **{verdict['state']}**.", ""]
    if verdict["backends"]:
        lines += ["| Backend | Result | Jobs | Why |", "|---|---|---|---|"]
        for b in verdict["backends"]:
            counts = _job_counts(b["jobs"])
            lines.append(
                f"| {_md(b['repo'])} | {GLYPHS.get(b['state'], '')} {b['state']} | {counts} | {_md(b['reason'])} |"
            )
    if any("not blocking:" in b["reason"] for b in verdict["backends"]):
        lines += [
            "",
            "Some failures are not this PR's: already failing on trunk, known issues an admin marked as not blocking "
            "the gate, the backend's expected failures, flaky tests or tests the backend muted. Each is listed above "
            "with its reason and does not block.",
        ]
    lines += [
        "",
        "The latest attempt of each L4 job decides, as the PR's verdict on the HUD judges it: a failure new in this PR "
        "blocks, and so does a job that shows too little to tell (timed out, never started or cancelled; a list of "
        "failed tests shorter than its count, or cut). A job cancelled because a newer head was pushed counts nowhere; "
        "work still running keeps the gate in progress.",
    ]
    if settings.CRCR_PUBLIC_URL:
        lines += ["", f"Details: {public_url(pr_path(verdict['pr_number']))}"]
    return "\n".join(lines)[:65535]


def _job_counts(jobs: list[dict]) -> str:
    counted = [j for j in jobs if j["state"] != State.SUPERSEDED]
    passed = sum(1 for j in counted if j["state"] in PASSING)
    return f"{passed}/{len(counted)} passed" if counted else "—"


def _md(text: str) -> str:
    return md_code(text, 300, table=True)


def gate_body(pr_number: int, head_sha: str) -> dict:
    """The check run body (without name and head_sha) for the gate of this head."""
    verdict = gate_verdict(pr_number, head_sha)
    body = {
        "status": "in_progress" if verdict["state"] == "pending" else "completed",
        "external_id": f"gate:{pr_number}",
        "details_url": public_url(pr_path(pr_number)),
        "output": {"title": verdict["title"][:255], "summary": gate_summary(verdict)},
    }
    if verdict["conclusion"]:
        body["conclusion"] = verdict["conclusion"]
    return body
