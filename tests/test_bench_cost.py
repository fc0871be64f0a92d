"""devtools.bench.cost: the callback's CPU against its floor and against another revision. These
test the harness's pieces (the revision chosen, the requests
it builds, how samples become a verdict); no test here times anything: the goal is judged in
`make bench` only."""

import json

import pytest

from devtools.bench import cost


def test_the_guard_compares_with_the_newest_tag_else_the_recorded_baseline():
    assert cost.against_default(lambda *args: "v1.4\n") == "v1.4"
    assert cost.against_default(lambda *args: None) == cost.BASELINE_REV  # no tag: git describe fails


def test_the_request_is_a_json_post_as_gunicorn_passes_it():
    env = cost.environ("/github/callback", b'{"a":1}', "tok")
    assert (env["REQUEST_METHOD"], env["PATH_INFO"], env["CONTENT_LENGTH"]) == ("POST", "/github/callback", "7")
    assert env["wsgi.input"].read() == b'{"a":1}'
    assert env["HTTP_AUTHORIZATION"] == "Bearer tok"
    assert "HTTP_AUTHORIZATION" not in cost.environ("/bench/floor", b"{}", None)


def test_the_ratio_is_the_median_of_each_rounds_ratio():
    costs = cost.Costs("this", "abc")
    costs.add({"callback_ns": [3_000_000, 3_000_000, 9_000_000], "floor_ns": [1_000_000] * 3, "errors": 0})
    costs.add({"callback_ns": [2_000_000] * 3, "floor_ns": [1_000_000, 1_000_000, 4_000_000], "errors": 1})
    costs.add({"callback_ns": [4_000_000] * 3, "floor_ns": [1_000_000] * 3, "errors": 0})
    summary = costs.summary()
    assert summary["round_ratios"] == [3.0, 2.0, 4.0]
    assert summary["pair_ratio"] == 3.0  # each request's callback over the empty view's right after it
    assert summary["ratio_to_floor"] == 3.0
    assert summary["callback_cpu_ms"] == 3.0 and summary["floor_cpu_ms"] == 1.0
    # the means carry what the medians leave out (the 9 ms callback, the 4 ms empty view)
    assert (summary["callback_mean_ms"], summary["floor_mean_ms"]) == (3.6667, 1.3333)
    assert (summary["requests"], summary["errors"]) == (9, 1)
    line = cost.verdicts({"this": summary}, "this", None)[0]
    assert line.endswith("; means 3.6667 and 1.3333 ms")


def test_the_verdict_names_each_cost_and_the_change_against_the_other_revision():
    base = {"requests": 10, "errors": 0, "callback_cpu_ms": 1.0, "floor_cpu_ms": 0.4}
    lines = cost.verdicts(
        {
            "this": {**base, "rev": "b" * 40, "ratio_to_floor": 1.8},
            "against": {**base, "rev": "a" * 40, "ratio_to_floor": 2.4},
        },
        "this",
        "against",
    )
    assert "the relay's own 0.6 ms: 1.8× the empty view" in lines[0]
    assert "2.4× the empty view" in lines[1]
    assert lines[2] == f"callback ÷ empty view, {'b' * 12} against {'a' * 12}: -25.0%"
    assert len(cost.verdicts({"this": {**base, "rev": "b", "ratio_to_floor": 1.8}}, "this", None)) == 1


def test_an_answer_is_read_from_the_probe_line_by_line(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, sys\n"
        "print(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    n = json.loads(line)['pairs']\n"
        "    print(json.dumps({'callback_ns': [1] * n, 'floor_ns': [1] * n, 'errors': 0}), flush=True)\n"
    )
    probe = cost.Probe("this", tmp_path, tmp_path / "store", script=script)
    try:
        assert probe.wait_ready() == {"ready": True}
        assert probe.ask(3)["callback_ns"] == [1, 1, 1]
    finally:
        probe.close()
    assert probe.proc.returncode == 0


def test_a_probe_that_dies_is_an_error_not_a_hang(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text("import sys; sys.exit(3)\n")
    probe = cost.Probe("against", tmp_path, tmp_path / "store", script=script)
    with pytest.raises(RuntimeError, match="did not answer"):
        probe.wait_ready()
    assert probe.proc.returncode == 3 and probe.log.closed


def test_an_unknown_revision_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no such revision"):
        cost.worktree("no-such-rev-" + json.dumps(1), tmp_path)


def test_the_guard_runs_in_the_parent_and_never_reaches_a_configurations_run(monkeypatch):
    from django.core.management import call_command

    from devtools.management.commands import bench

    guarded, children = [], []
    monkeypatch.setattr(bench.Command, "cost", lambda self, options: guarded.append(options["against"]))
    monkeypatch.setattr(bench.Command, "run_against", lambda self, target, options: children.append(options["only"]))
    call_command("bench", "--only", "cost", "--against", "v1")
    assert (guarded, children) == (["v1"], [])
    call_command("bench", "--only", "callbacks,cost")
    assert (guarded, children) == (["v1", None], [["callbacks"]])
    call_command("bench", "--only", "callbacks")
    assert (guarded, children) == (["v1", None], [["callbacks"], ["callbacks"]])


class _FakeProbe:
    """Answers each round as a probe would: in_progress then completion per job, the completion
    costing 1 ms more when it counts modules."""

    def __init__(self):
        self.asked = []

    def ask(self, pairs, modules=0):
        self.asked.append(modules)
        completion = 2_000_000 + (1_000_000 if modules else 0)
        return {"callback_ns": [500_000, completion] * pairs, "floor_ns": [100_000] * 2 * pairs, "errors": 0}


def test_the_capabilities_ab_compares_completions_with_and_without_module_counts_in_turn():
    probe = _FakeProbe()
    result = cost.capabilities(probe, rounds=2, pairs=3, modules=1100)
    assert probe.asked == [0, 1100, 1100, 0]
    assert (result["without_ms"], result["with_ms"], result["added_ms"]) == (2.0, 3.0, 1.0)
    assert result["met"] and result["completions"] == 6
    line = cost.capabilities_verdict(result, "a388c88e3468aaaa")
    assert "1,100 modules" in line and "+1.0 ms [met: ≤ 2 ms]" in line and "against a388c88e3468" in line


def test_a_capabilities_ab_over_its_goal_is_missed():
    probe = _FakeProbe()
    result = cost.capabilities(probe, rounds=1, pairs=2, modules=10)
    result = {**result, "added_ms": 2.5, "met": False}
    assert "[missed: ≤ 2 ms]" in cost.capabilities_verdict(result, None)


def test_the_ab_jobs_completion_counts_its_modules_and_its_in_progress_none():
    from devtools.bench.load import CallbackJob, module_counts

    job = CallbackJob(b'{"workflow":', "o/r", "1", "test", "failure", modules=5)
    completed = json.loads(job.body("completed"))["workflow"]
    assert completed["module_counts"] == module_counts(5, 3) and len(module_counts(1100, 0)) == 1100
    assert "module_counts" not in json.loads(job.body("in_progress"))["workflow"]
