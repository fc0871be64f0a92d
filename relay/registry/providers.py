"""Reading and writing the upstream relay's CI providers file, `config/ci_providers.yml`
(reference/relay.md §2.4, test-infra #8468). Pure functions, no DB.

The file maps Buildkite pipelines to repos under `providers.buildkite.repo_map`: the key is
`<organization_id>/<pipeline_id>` (immutable UUIDs, never slugs), the value `owner/repo` or
`{repo: owner/repo, required_claims: {claim: [allowed values] | one value}}`. A top-level legacy
`buildkite.repo_map` is read only when the new section has no entries, as upstream does; `issuer`
and `jwks_uri` keys are ignored (trust anchors are configuration here, CRCR_OIDC_ISSUERS).

Where upstream skips a bad entry silently, we refuse the file and name every bad entry; claim
values are normalised to lists of strings, as upstream does. The writer emits the new section
only, the string form when an entry has no required claims and the mapping form otherwise, so
`parse_providers(render_providers(parse_providers(x))) == parse_providers(x)`.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .allowlist import repo_name_problem, yaml_load_strict, yaml_scalar

_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_CLAIM_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAPPING_KEYS = ("repo", "required_claims")
HEADER = "# config/ci_providers.yml exported by CRCR HUD (upstream relay format; see reference/relay.md §2.4)"


@dataclass
class PipelineMapping:
    pipeline: str
    """`<organization_id>/<pipeline_id>`."""
    repo: str
    required_claims: dict[str, list[str]] = field(default_factory=dict)


class ProvidersError(ValueError):
    """One or more problems with a providers file; `.errors` lists every one of them."""

    def __init__(self, errors: str | Iterable[str]):
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("\n".join(self.errors))


def parse_providers(text: str) -> list[PipelineMapping]:
    doc = yaml_load_strict(text, ProvidersError)
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise ProvidersError(f"the document must be a mapping (providers: buildkite: repo_map: ...), not {_kind(doc)}")
    errors: list[str] = []
    providers = _section(doc, "providers", errors)
    mappings = _repo_map(_section(providers, "buildkite", errors, "providers."), "providers.buildkite.repo_map", errors)
    if not mappings and not errors:
        mappings = _repo_map(_section(doc, "buildkite", errors), "buildkite.repo_map", errors)
    errors += _same_repo_twice(mappings)
    if errors:
        raise ProvidersError(errors)
    return mappings


def _section(parent: dict, key: str, errors: list[str], prefix: str = "") -> dict:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(f"{prefix}{key} must be a mapping, not {_kind(value)}")
        return {}
    return value


def _repo_map(section: dict, where: str, errors: list[str]) -> list[PipelineMapping]:
    value = section.get("repo_map")
    if value is None:
        return []
    if not isinstance(value, dict):
        errors.append(
            f"{where} must be a mapping of <organization_id>/<pipeline_id> to a repository, not {_kind(value)}"
        )
        return []
    mappings = []
    for key, entry in value.items():
        problems, mapping = _entry(key, entry)
        errors.extend(f"{where} entry {_show(key)}: {problem}" for problem in problems)
        if mapping is not None:
            mappings.append(mapping)
    return mappings


def _entry(key, value) -> tuple[list[str], PipelineMapping | None]:
    problems = _key_problems(key)
    if isinstance(value, str):
        repo, claims = value, {}
    elif isinstance(value, dict):
        unknown = [str(k) for k in value if k not in MAPPING_KEYS]
        problems += (
            [f"unsupported field(s) {', '.join(map(repr, unknown))} (only repo and required_claims)"] if unknown else []
        )
        repo, claims = value.get("repo"), _claims(value.get("required_claims"), problems)
    else:
        return problems + [
            f"value must be owner/repo or a mapping with repo and required_claims, not {_kind(value)}"
        ], None
    repo = repo.strip().strip("/") if isinstance(repo, str) else ""
    if problem := repo_name_problem(repo):
        problems.append(f"repo {_show(value.get('repo') if isinstance(value, dict) else value)}: {problem}")
    return problems, (None if problems else PipelineMapping(str(key).strip(), repo, claims))


def _key_problems(key) -> list[str]:
    parts = str(key).strip().split("/") if isinstance(key, str) else []
    if len(parts) != 2 or not all(_UUID_RE.fullmatch(part) for part in parts):
        return ["key must be <organization_id>/<pipeline_id>, both UUIDs (slugs can be renamed and re-claimed)"]
    return []


def _claims(raw, problems: list[str]) -> dict[str, list[str]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"required_claims must be a mapping of claim to allowed values, not {_kind(raw)}")
        return {}
    claims = {}
    for name, allowed in raw.items():
        values = allowed if isinstance(allowed, list) else [allowed]
        if not isinstance(name, str) or not _CLAIM_RE.fullmatch(name):
            problems.append(f"required claim {_show(name)} is not a claim name")
        elif not values or not all(_is_claim_value(v) for v in values):
            problems.append(f"required claim {name!r} must list text values (quote ones YAML reads as true/false/null)")
        else:
            claims[name] = [str(v) for v in values]
    return claims


def _is_claim_value(value) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _same_repo_twice(mappings: list[PipelineMapping]) -> list[str]:
    """The registry keeps one Buildkite pipeline per repository."""
    first: dict[str, str] = {}
    errors = []
    for mapping in mappings:
        seen = first.setdefault(mapping.repo.lower(), mapping.pipeline)
        if seen != mapping.pipeline:
            errors.append(
                f"entry {mapping.pipeline!r}: {mapping.repo} is already mapped from {seen!r}; one pipeline per repository"
            )
    return errors


def _kind(value) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


# --- rendering -----------------------------------------------------------------------------------


def render_providers(mappings: Iterable[PipelineMapping]) -> str:
    ordered = sorted(mappings, key=lambda m: m.pipeline.lower())
    lines = [HEADER, "providers:", "  buildkite:"]
    if not ordered:
        return "\n".join(lines + ["    repo_map: {}"]) + "\n"
    lines.append("    repo_map:")
    for mapping in ordered:
        lines += _render_entry(mapping)
    return "\n".join(lines) + "\n"


def _render_entry(mapping: PipelineMapping) -> list[str]:
    key = yaml_scalar(mapping.pipeline)
    if not mapping.required_claims:
        return [f"      {key}: {yaml_scalar(mapping.repo)}"]
    lines = [f"      {key}:", f"        repo: {yaml_scalar(mapping.repo)}", "        required_claims:"]
    for name, values in mapping.required_claims.items():
        lines.append(f"          {name}: [{', '.join(yaml_scalar(v) for v in values)}]")
    return lines
