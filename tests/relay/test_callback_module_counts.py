"""The callback checks `workflow.module_counts` without reading them into a new object
(relay/callbacks/body.py: module_counts_check, issue 55 goal 5): it must refuse exactly what
`module_counts_read` refuses, in the same words, and accept everything else."""

import random

import pytest

from relay.callbacks.body import MAX_COUNT, MAX_MODULE_CHARS, MAX_MODULES, BadCallback, module_counts_check
from relay.callbacks.body import module_counts_read as read


def _refusal(check, value) -> str | None:
    try:
        check(value)
    except BadCallback as exc:
        return str(exc)
    return None


COUNTS = [0, 1, 7, MAX_COUNT, MAX_COUNT + 1, -1, True, False, None, 2.0, "3", [1], {}]
KEYS = ["passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed", "duration", ""]


def _values():
    rng = random.Random(55)
    for _ in range(3000):
        modules = {}
        for k in range(rng.randint(0, 6)):
            name = "test/test_" + "x" * rng.choice([1, 5, MAX_MODULE_CHARS - 10, MAX_MODULE_CHARS - 9]) + str(k)
            if rng.random() < 0.1:
                modules[name] = rng.choice([3, None, "text", [1], True])
            else:
                modules[name] = {rng.choice(KEYS): rng.choice(COUNTS) for _ in range(rng.randint(0, 4))}
        yield modules
    yield from (None, "", "{}", '{"test_ops": {"passed": 3}}', "{not json", [], 3, {})
    yield {f"m{k}": {"passed": 1} for k in range(MAX_MODULES)}
    yield {f"m{k}": {"passed": 1} for k in range(MAX_MODULES + 1)}


def test_the_check_refuses_what_the_reader_refuses_in_its_words():
    for value in _values():
        assert _refusal(module_counts_check, value) == _refusal(read, value), value


@pytest.mark.parametrize("count", [-1, MAX_COUNT + 1, True, 1.0])
def test_a_bad_count_among_a_thousand_good_modules_is_refused(count):
    modules = {f"test/test_{k}.py": {"passed": k, "skipped": 1} for k in range(1000)}
    modules["test/test_500.py"]["failed"] = count
    with pytest.raises(BadCallback, match=r"test_500.py'.failed must be a non-negative integer"):
        module_counts_check(modules)
