"""The public relay beside us (devtools/bench/public_relay.py): when it can run, and its seed.
Fakes only: CI never needs the public relay's code (its rounds: tests/test_bench_paired.py)."""

from devtools.bench.public_relay import DIR_ENV, allowlist_yaml, relay_dir


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


def test_the_allowlist_names_every_repo_at_l2():
    assert allowlist_yaml(["a/b", "c/d"]) == "L2:\n  - a/b\n  - c/d\n"
