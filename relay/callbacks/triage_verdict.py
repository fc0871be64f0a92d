"""`workflow.triage_verdict`: a downstream analyser's advisory verdict on one job attempt, exactly
as the callback action documents it (test-infra #8673, #8803; reference/upstream-changes.md).

It is hostile input that never decides anything: a structural violation (wrong type, an unknown
enum value or version, a suspect on a category other than upstream, a bad URL, over 16 KB) drops
the whole verdict and the callback goes on as if none was sent; an over-long string is cut;
unknown keys are ignored. What is kept is the normalised verdict, stored on the attempt's JobRun
and shown as advice beside, never instead of, the job's own conclusion."""

import json
import re
from urllib.parse import urlsplit

from relay.inputs import jsonin
from relay.inputs.params import aware_datetime, int_param

SCHEMA_VERSION = 1
CATEGORIES = ("upstream", "backend", "infra", "flake", "unknown")
CONFIDENCES = ("high", "medium", "low")
MAX_BYTES = 16 * 1024
MAX_EVIDENCE = 10
MAX_URL_CHARS = 2000
LIMITS = {"summary": 1000, "reason": 300, "job": 200, "test": 200, "excerpt": 1000, "analyzer": 100}
ANALYZER_KEYS = ("name", "version", "model", "prompt_version")
_COMMIT_RE = re.compile(r"[0-9a-fA-F]{7,40}")
_UNSAFE_URL_RE = re.compile(r"[\s\x00-\x1f\x7f]")


class Dropped(ValueError):
    """Why the verdict was dropped (logged; the callback itself is unaffected)."""


def triage_verdict_read(raw) -> tuple[dict | None, str]:
    """(the normalised verdict, "") or (None, why it was dropped); (None, "") when none was sent."""
    if raw is None:
        return None, ""
    try:
        return _verdict(_parsed(raw)), ""
    except Dropped as exc:
        return None, str(exc)


def _parsed(raw):
    """The action sends the input parsed; a verdict that arrives as its JSON text reads the same,
    and passes every check the callback body passed (relay.inputs.jsonin.checked: no NUL, no lone
    surrogate, no NaN, no nesting past the body's limit counted from `workflow.triage_verdict`)."""
    if not isinstance(raw, str):
        return raw
    try:
        return jsonin.checked(raw, what="triage_verdict (JSON text)", max_depth=jsonin.MAX_DEPTH - 2)
    except jsonin.NotStorable as exc:
        raise Dropped(str(exc)[:200]) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise Dropped("triage_verdict is a string that is not a JSON object") from exc


def plain_http_url(value: str) -> bool:
    """An http(s) URL with a host, no credentials or `@` in it, no spaces or control characters."""
    if _UNSAFE_URL_RE.search(value):
        return False
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(host) and "@" not in parts.netloc


def _verdict(raw) -> dict:
    if not isinstance(raw, dict):
        raise Dropped("triage_verdict must be an object")
    if len(json.dumps(raw, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")) > MAX_BYTES:
        raise Dropped(f"triage_verdict is larger than {MAX_BYTES // 1024} KB")
    if _version(raw.get("schema_version")) != SCHEMA_VERSION:
        raise Dropped(f"triage_verdict schema_version {raw.get('schema_version')!r} is not {SCHEMA_VERSION}")
    category = _choice(raw, "category", CATEGORIES)
    verdict = {
        "schema_version": SCHEMA_VERSION,
        "category": category,
        "confidence": _choice(raw, "confidence", CONFIDENCES),
        "summary": _text(raw, "summary", required=True),
        "suspected_upstream": _suspect(raw.get("suspected_upstream"), category),
        "evidence": _evidence(raw.get("evidence")),
        "reproduced_on_retry": _boolean(raw.get("reproduced_on_retry")),
        "analyzer": _analyzer(raw.get("analyzer")),
        "analyzed_at": _when(raw.get("analyzed_at")),
    }
    return verdict


def _version(value) -> int | None:
    """An integer, or its ASCII digits as a string (relay.inputs.params: `¹` and `١` are no numbers)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int_param(value)


def _choice(raw: dict, key: str, allowed: tuple) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or value not in allowed:
        raise Dropped(f"triage_verdict.{key} must be one of {', '.join(allowed)}, not {value!r}"[:200])
    return value


def _text(raw: dict, key: str, *, required: bool = False, limit_key: str | None = None, where: str = "") -> str:
    """A string, cut to its limit; never coerced from a number or a boolean."""
    value = raw.get(key)
    label = f"triage_verdict.{where}{key}"
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise Dropped(f"{label} must be a string")
    if required and not value.strip():
        raise Dropped(f"{label} must not be empty")
    return value[: LIMITS[limit_key or key]]


def _suspect(value, category: str) -> dict | None:
    if value is None:
        return None
    if category != "upstream":
        raise Dropped(f"triage_verdict.suspected_upstream is only allowed with category upstream, not {category}")
    if not isinstance(value, dict):
        raise Dropped("triage_verdict.suspected_upstream must be an object")
    pr, commit = value.get("pr"), value.get("commit")
    if pr is not None and (isinstance(pr, bool) or not isinstance(pr, int) or pr < 1):
        raise Dropped("triage_verdict.suspected_upstream.pr must be a positive integer")
    if commit is not None and (not isinstance(commit, str) or not _COMMIT_RE.fullmatch(commit)):
        raise Dropped("triage_verdict.suspected_upstream.commit must be 7 to 40 hex digits")
    if pr is None and commit is None:
        raise Dropped("triage_verdict.suspected_upstream must name a pr or a commit")
    reason = _text(value, "reason", where="suspected_upstream.")
    return {"pr": pr, "commit": commit.lower() if commit else None, "reason": reason}


def _evidence(value) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Dropped("triage_verdict.evidence must be a list")
    return [_evidence_item(item, index) for index, item in enumerate(value[:MAX_EVIDENCE])]


def _evidence_item(item, index: int) -> dict:
    where = f"evidence[{index}]."
    if not isinstance(item, dict):
        raise Dropped(f"triage_verdict.evidence[{index}] must be an object")
    log_url = item.get("log_url")
    if log_url is not None and not (
        isinstance(log_url, str) and len(log_url) <= MAX_URL_CHARS and plain_http_url(log_url)
    ):
        raise Dropped(f"triage_verdict.{where}log_url must be a plain http(s) URL")  # a cut URL would mislead
    return {
        "job": _text(item, "job", where=where),
        "test": _text(item, "test", where=where),
        "excerpt": _text(item, "excerpt", where=where),
        "log_url": log_url or "",
    }


def _boolean(value) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise Dropped("triage_verdict.reproduced_on_retry must be true or false")
    return value


def _analyzer(value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Dropped("triage_verdict.analyzer must be an object")
    found = {key: _text(value, key, limit_key="analyzer", where="analyzer.") for key in ANALYZER_KEYS}
    return {key: text for key, text in found.items() if text}


def _when(value) -> str | None:
    """In UTC, read as every timestamp from outside is (relay.inputs.params.aware_datetime): one that
    names no date or leaves the calendar once in UTC would break every page that shows it. One
    without a zone is UTC, as before."""
    if value is None:
        return None
    moment = aware_datetime(value)
    if moment is None and isinstance(value, str):
        moment = aware_datetime(f"{value}+00:00")
    if moment is None:
        raise Dropped("triage_verdict.analyzed_at must be an ISO 8601 timestamp within years 1-9999 in UTC")
    return moment.isoformat()
