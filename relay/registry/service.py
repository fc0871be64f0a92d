"""Writes to the registry of downstream projects. Every level change goes through
`project_set_level`, so each one leaves a LevelChange row saying who, when and why."""

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from relay.models import InstalledRepo, Level, LevelChange, Project

from .allowlist import Entry, oncall_list, parse_allowlist, render_allowlist, repo_name_problem
from .providers import PipelineMapping, ProvidersError, parse_providers, render_providers


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # Reference and health-probe projects absent from the file: left exactly as they were.
    kept: list[str] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(
            f"{len(getattr(self, name))} {name}" for name in ("created", "updated", "deactivated", "unchanged", "kept")
        )
        return f"allowlist import: {counts}"


# --- single projects -----------------------------------------------------------------------------


@transaction.atomic
def project_set_level(
    project: Project, level: str, *, by: str, reason: str, device: str | None = None
) -> LevelChange | None:
    """Move `project` to `level` (and `device`, when given); None when the level did not change."""
    if level not in Level.values:
        raise ValidationError({"level": f"unknown level {level!r}"})
    # The stored level, not the caller's copy, is what the change is from.
    current = Project.objects.select_for_update().get(pk=project.pk)
    device = current.device if device is None else device
    _check_device(level, device)
    project.level, project.device = level, device
    if level == current.level:
        if project.device != current.device:
            project.save(update_fields=["device", "updated_at"])
        return None
    project.save(update_fields=["level", "device", "updated_at"])
    return _record(project, current.level, by=by, reason=reason)


@transaction.atomic
def project_register(project: Project, *, by: str, reason: str = "") -> Project:
    """Save a new, unsaved `project` and record its initial level."""
    problem = repo_name_problem(project.full_name)
    if problem:
        raise ValidationError({"full_name": problem})
    project.full_name = canonical_repo_name(project.full_name)
    _check_device(project.level, project.device)
    project.full_clean()
    project.save()
    _record(project, "", by=by, reason=reason)
    return project


def project_create(full_name: str, level: str, *, by: str, reason: str = "", **fields) -> Project:
    return project_register(Project(full_name=full_name, level=level, **fields), by=by, reason=reason)


def projects_deactivate(projects) -> int:
    """Stop relaying to `projects` without touching their level; returns how many changed."""
    return Project.objects.filter(pk__in=[p.pk for p in projects], active=True).update(
        active=False, updated_at=timezone.now()
    )


def _record(project: Project, from_level: str, *, by: str, reason: str) -> LevelChange:
    return LevelChange.objects.create(
        project=project, from_level=from_level, to_level=project.level, changed_by=by, reason=reason
    )


def _check_device(level: str, device: str):
    if level == Level.L3 and not device:
        raise ValidationError({"device": "an L3 project needs a device (its ciflow/crcr/<device> label)"})


# --- allowlist.yml -------------------------------------------------------------------------------


def allowlist_import(text: str, *, by: str, reason: str = "allowlist import") -> ImportResult:
    """Replace the registry's levels with the file's; all or nothing."""
    entries = parse_allowlist(text)  # raises before anything is written
    result = ImportResult()
    with transaction.atomic():
        existing = {p.full_name.lower(): p for p in Project.objects.select_for_update()}
        for entry in entries:
            project = existing.pop(entry.full_name.lower(), None)
            _import_entry(project, entry, result, by=by, reason=reason)
        for project in existing.values():
            _import_absent(project, result)
    return result


def _import_entry(project: Project | None, entry: Entry, result: ImportResult, *, by: str, reason: str):
    if project is None:
        project_create(entry.full_name, entry.level, by=by, reason=reason, device=entry.device, **_entry_fields(entry))
        result.created.append(entry.full_name)
    elif _project_apply(project, entry, by=by, reason=reason):
        result.updated.append(entry.full_name)
    else:
        result.unchanged.append(entry.full_name)


def _entry_fields(entry: Entry) -> dict:
    return {"oncalls": list(entry.oncalls), "events": list(entry.events), "position": entry.position, "active": True}


def canonical_repo_name(name: str) -> str:
    """The one spelling stored for a repository, whatever case a file or a form wrote it in
    (repository names compare case-insensitively, and upstream's first allowlist wrote
    `ascend/pytorch`): GitHub's own once an App installation listed the repo, else the one given."""
    github = InstalledRepo.objects.filter(full_name__iexact=name).values_list("full_name", flat=True).first()
    return github or name


def _project_apply(project: Project, entry: Entry, *, by: str, reason: str) -> bool:
    """Make `project` match `entry`; True when anything changed. The name takes the file's
    spelling unless GitHub's is known (canonical_repo_name)."""
    changed = _project_update(project, {"full_name": canonical_repo_name(entry.full_name), **_entry_fields(entry)})
    device_before = project.device
    moved = project_set_level(project, entry.level, by=by, reason=reason, device=entry.device)
    return bool(changed or moved or project.device != device_before)


@transaction.atomic
def project_update(project: Project, fields: dict, *, by: str, reason: str = "") -> list[str]:
    """Change a project's fields; a level (and device) change goes through project_set_level so
    it is audited like any other. Returns the names of the fields that changed."""
    fields = dict(fields)
    level, device = fields.pop("level", None), fields.pop("device", None)
    changed = _project_update(project, fields)
    if level is not None or device is not None:
        before = (project.level, project.device)
        project_set_level(project, level or project.level, by=by, reason=reason, device=device)
        changed += [
            name for name, old in zip(("level", "device"), before, strict=True) if getattr(project, name) != old
        ]
    return changed


def _project_update(project: Project, fields: dict) -> list[str]:
    """Save the fields whose values differ (never level or device: see project_set_level)."""
    changed = [name for name, value in fields.items() if getattr(project, name) != value]
    for name in changed:
        setattr(project, name, fields[name])
    if changed:
        project.save(update_fields=[*changed, "updated_at"])
    return changed


def _import_absent(project: Project, result: ImportResult):
    if project.is_reference or project.is_health_probe:
        result.kept.append(project.full_name)
    elif project.active:
        projects_deactivate([project])
        result.deactivated.append(project.full_name)


def allowlist_export() -> str:
    projects = Project.objects.filter(active=True).order_by("level", "position", "full_name")
    return render_allowlist(project_entry(p) for p in projects)


def project_entry(project: Project) -> Entry:
    device = project.device if project.level == Level.L3 else ""
    return Entry(
        project.full_name,
        project.level,
        device,
        tuple(oncall_list(project.oncalls)),
        project.position,
        tuple(project.events or ()),
    )


# --- config/ci_providers.yml ---------------------------------------------------------------------


@dataclass
class ProvidersImportResult:
    updated: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return "providers import: " + ", ".join(
            f"{len(getattr(self, name))} {name}" for name in ("updated", "cleared", "unchanged")
        )


def providers_import(text: str) -> ProvidersImportResult:
    """Make the registry's Buildkite pipeline mappings the file's; all or nothing. Every mapped
    repository must already be registered (import the allowlist first); a project whose pipeline
    the file no longer lists loses it, with its required claims."""
    mappings = parse_providers(text)  # raises before anything is written
    result = ProvidersImportResult()
    with transaction.atomic():
        projects = {p.full_name.lower(): p for p in Project.objects.select_for_update()}
        missing = [
            f"entry {m.pipeline!r}: {m.repo} is not a registered project; import the allowlist first"
            for m in mappings
            if m.repo.lower() not in projects
        ]
        if missing:
            raise ProvidersError(missing)
        mapped = {m.repo.lower(): m for m in mappings}
        for name, project in projects.items():
            _pipeline_apply(project, mapped.get(name), result)
    return result


def _pipeline_apply(project: Project, mapping: PipelineMapping | None, result: ProvidersImportResult) -> None:
    if mapping is None:
        if project.buildkite_pipeline:
            _project_update(project, {"buildkite_pipeline": "", "oidc_required_claims": {}})
            result.cleared.append(project.full_name)
        return
    changed = _project_update(
        project, {"buildkite_pipeline": mapping.pipeline, "oidc_required_claims": mapping.required_claims}
    )
    (result.updated if changed else result.unchanged).append(project.full_name)


def providers_export() -> str:
    projects = Project.objects.exclude(buildkite_pipeline="").order_by("buildkite_pipeline")
    return render_providers(
        PipelineMapping(p.buildkite_pipeline, p.full_name, dict(p.oidc_required_claims or {})) for p in projects
    )
