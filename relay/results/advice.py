"""A job attempt's triage verdict as every page and the oncall comment show it: advice from the
downstream's analyser, always marked advisory, beside (never instead of) the job's own result.
The verdict was validated and normalised on arrival (relay.callbacks.triage_verdict); here it
only gains what depends on where it is shown: whether the suspected upstream change is the PR
the job ran for."""

from dataclasses import dataclass
from datetime import datetime

from relay.inputs.params import aware_datetime
from relay.policy.links import short_sha

CATEGORY_LABELS = {
    "upstream": "Upstream",
    "backend": "Backend",
    "infra": "Infrastructure",
    "flake": "Intermittent",
    "unknown": "Unknown cause",
}


@dataclass(frozen=True)
class Advice:
    category: str
    confidence: str
    summary: str
    suspect_pr: int | None
    suspect_commit: str
    suspect_reason: str
    this_pr: bool | None
    """Whether the suspected change is the PR the job ran for; None when that cannot be said."""
    evidence: list
    analyzer: dict
    analyzed_at: datetime | None
    reproduced_on_retry: bool | None

    @property
    def category_label(self) -> str:
        return CATEGORY_LABELS.get(self.category, self.category)

    @property
    def headline(self) -> str:
        """ "Upstream · high confidence · advisory": upstream's tooltip wording."""
        return f"{self.category_label} · {self.confidence} confidence · advisory"

    @property
    def suspect_mark(self) -> str:
        return {True: "(this PR)", False: "(not this PR)"}.get(self.this_pr, "")

    @property
    def suspect_text(self) -> str:
        """ "#170001 (this PR)", "commit abcdef1 (not this PR)", or "" without a suspect."""
        named = (
            f"#{self.suspect_pr}"
            if self.suspect_pr
            else (f"commit {short_sha(self.suspect_commit)}" if self.suspect_commit else "")
        )
        return f"{named} {self.suspect_mark}".strip() if named else ""

    @property
    def suspect_pr_page(self) -> bool:
        """Whether the HUD has a page for the suspect PR (its URLs take up to 9 digits)."""
        return bool(self.suspect_pr) and self.suspect_pr < 10**9

    @property
    def analyzer_text(self) -> str:
        """ "ci-triage-bot 0.4.1 · model m-large · prompt 7"."""
        a = self.analyzer
        parts = [" ".join(p for p in (a.get("name", ""), a.get("version", "")) if p)]
        parts += [f"model {a['model']}"] if a.get("model") else []
        parts += [f"prompt {a['prompt_version']}"] if a.get("prompt_version") else []
        return " · ".join(p for p in parts if p)


def advice_for(job, pr_number: int | None = None) -> Advice | None:
    """The job's verdict as Advice, or None. `pr_number` is the page's PR when the job has none
    of its own (a trunk commit knows the PR that landed it)."""
    return advice_from(
        getattr(job, "triage_verdict", None),
        getattr(job, "pr_number", None) or pr_number,
        getattr(job, "head_sha", "") or "",
    )


def advice_from(verdict, pr_number: int | None, head_sha: str) -> Advice | None:
    if not isinstance(verdict, dict):
        return None
    suspect = verdict.get("suspected_upstream") or {}
    return Advice(
        category=verdict.get("category", "unknown"),
        confidence=verdict.get("confidence", "low"),
        summary=verdict.get("summary", ""),
        suspect_pr=suspect.get("pr"),
        suspect_commit=suspect.get("commit") or "",
        suspect_reason=suspect.get("reason") or "",
        this_pr=_is_this_pr(suspect, pr_number, head_sha),
        evidence=list(verdict.get("evidence") or []),
        analyzer=dict(verdict.get("analyzer") or {}),
        analyzed_at=aware_datetime(verdict.get("analyzed_at")),  # one stored before it was checked is shown as none
        reproduced_on_retry=verdict.get("reproduced_on_retry"),
    )


def _is_this_pr(suspect: dict, pr_number: int | None, head_sha: str) -> bool | None:
    """A suspect PR compares with the job's PR. A suspect commit alone is this PR when it is the
    head the job tested; any other commit may still be one of the PR's, so nothing is claimed."""
    if not suspect or not pr_number:
        return None
    if suspect.get("pr"):
        return suspect["pr"] == pr_number
    commit = suspect.get("commit") or ""
    return True if commit and head_sha.lower().startswith(commit) else None
