"""The public relay beside us (devtools/bench/public_relay.py): when it can run, and how its
paired rounds are ordered and judged. Fakes only: CI never needs the public relay's code."""

from devtools.bench.public_relay import DIR_ENV, allowlist_yaml, paired_rounds, relay_dir, side_order


def test_without_a_directory_the_bench_says_why_it_falls_back():
    directory, why_not = relay_dir(None, environ={})
    assert directory is None
    assert DIR_ENV in why_not


def test_a_directory_without_its_server_or_virtualenv_is_not_runnable(tmp_path):
    (tmp_path / "local_server.py").write_text("")
    directory, why_not = relay_dir(str(tmp_path), environ={})
    assert directory is None
    assert "callback/lambda_function.py" in why_not


def test_the_environment_names_the_directory_when_no_option_does(tmp_path):
    for needed in ("local_server.py", "callback/lambda_function.py", ".venv/bin/python"):
        (tmp_path / needed).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / needed).write_text("")
    assert relay_dir(None, environ={DIR_ENV: str(tmp_path)}) == (tmp_path, "")


def test_each_side_goes_first_in_every_other_pair():
    assert side_order(3) == ["ours", "theirs", "theirs", "ours", "ours", "theirs"]


def test_the_ratio_is_the_median_of_each_pairs_own_ratio():
    rates = iter([600, 300, 200, 500, 450, 300])  # a busy stretch in the second pair
    result = paired_rounds(lambda side: {"rate": next(rates), "errors": 0}, pairs=3)
    assert result["ratios"] == [2.0, 2.5, 1.5]
    assert result["ratio"] == 2.0
    assert (result["ours_per_s"], result["theirs_per_s"]) == (500, 300)


def test_errors_of_either_side_are_counted():
    result = paired_rounds(lambda side: {"rate": 100, "errors": 1 if side == "theirs" else 0}, pairs=2)
    assert result["errors"] == 2


def test_the_allowlist_names_every_repo_at_l2():
    assert allowlist_yaml(["a/b", "c/d"]) == "L2:\n  - a/b\n  - c/d\n"
