"""Which integration path (eager ops, autograd, … compile/inductor, other) an upstream test
module belongs to: the admins' rules (PathRule, edited in the admin) first, then the defaults
shipped beside this module (paths.yml, from PyTorch's test/ layout, edited by pull request).
Patterns are RE2 (relay.inputs.linear), searched in the module name; the first that matches decides,
so an admin's rule overrides a default for the modules it matches."""

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from relay.inputs.linear import Linear, PatternError, linear
from relay.models import IntegrationPath, PathRule

DEFAULTS_FILE = Path(__file__).with_name("paths.yml")
PATHS = tuple(IntegrationPath.values)
"""Every path in the order pages show them; "other" last."""


@dataclass(frozen=True)
class Rule:
    pattern: str
    path: str


def rule_check(pattern: str, path: str) -> Rule:
    """A rule as given, or ValueError saying what is wrong (PatternError for the pattern)."""
    if path not in PATHS:
        raise ValueError(f"unknown integration path {path!r} (one of {', '.join(PATHS)})")
    _compiled(pattern)
    return Rule(pattern, path)


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Linear:
    return linear(pattern)


@lru_cache(maxsize=1)
def default_rules() -> tuple[Rule, ...]:
    """The rules shipped in paths.yml, checked as an admin's are."""
    return tuple(rule_check(item["pattern"], item["path"]) for item in yaml.safe_load(DEFAULTS_FILE.read_text()))


class Rules(list):
    """The rules in force, remembering each module's path once asked: a page reads the same
    ~300 modules for every backend and commit, and each costs up to one search per rule."""

    def __init__(self, rules):
        super().__init__(rules)
        self.paths: dict[str, str] = {}


def rules() -> Rules:
    """The rules in force, in order: the admins', then the shipped defaults."""
    stored = [Rule(pattern, path) for pattern, path in PathRule.objects.values_list("pattern", "path")]
    return Rules([*stored, *default_rules()])


def path_of(module: str, in_force: Rules) -> str:
    if module not in in_force.paths:
        in_force.paths[module] = _first_path(module, in_force)
    return in_force.paths[module]


def _first_path(module: str, in_force: list[Rule]) -> str:
    for rule in in_force:
        try:
            if _compiled(rule.pattern).search(module):
                return rule.path
        except PatternError:  # a row written around the admin's check: it matches nothing
            continue
    return IntegrationPath.OTHER
