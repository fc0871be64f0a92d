"""Modules to integration paths: the defaults shipped from PyTorch's test layout, the admins'
rules before them, patterns RE2 runs (a bad one is refused in the admin)."""

import pytest
from django.urls import reverse

from relay.enablement.paths import default_rules, path_of, rule_check, rules
from relay.inputs.linear import PatternError, is_linear
from relay.models import PathRule
from relay.policy.testids import module_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("reported", "path"),
    [
        ("test/test_ops.py", "eager ops"),
        ("test/test_ops_gradients.py", "eager ops"),
        ("test_torch.TestTorchDeviceTypePRIVATEUSE1", "eager ops"),
        ("test/test_binary_ufuncs.py", "eager ops"),
        ("test/test_autograd.py", "autograd"),
        ("test/autograd/test_complex.py", "autograd"),
        ("test/test_nn.py", "nn"),
        ("test/nn/test_convolution.py", "nn"),
        ("test/test_modules.py", "nn"),
        ("test/test_linalg.py", "linalg"),
        ("test/test_sparse_csr.py", "sparse"),
        ("test/profiler/test_profiler.py", "profiler"),
        ("test_profiler.TestProfilerPRIVATEUSE1", "profiler"),
        ("test/distributed/test_c10d_common.py", "distributed"),
        ("test/distributed/fsdp/test_fsdp_core.py", "distributed"),
        ("test/dynamo/test_repros.py", "compile/dynamo"),
        ("test/inductor/test_torchinductor.py", "compile/inductor"),
        ("test/export/test_export.py", "export"),
        ("test/test_cuda.py", "other"),
        ("", "other"),
    ],
)
def test_the_shipped_defaults_follow_pytorchs_test_layout(reported, path):
    assert path_of(module_of(reported), rules()) == path


def test_every_shipped_pattern_runs_on_re2():
    from relay.enablement.paths import _compiled

    assert default_rules() and all(is_linear(_compiled(rule.pattern)) for rule in default_rules())


def test_an_admins_rule_comes_before_the_defaults():
    assert path_of("test_cuda", rules()) == "other"
    PathRule.objects.create(position=1, pattern=r"^test_cuda$", path="eager ops")
    PathRule.objects.create(position=2, pattern=r"^test_nn$", path="other")
    assert path_of("test_cuda", rules()) == "eager ops"
    assert path_of("test_nn", rules()) == "other"
    assert path_of("test_autograd", rules()) == "autograd"


def test_a_rule_with_a_backtracking_pattern_or_an_unknown_path_is_refused():
    with pytest.raises(PatternError):
        rule_check(r"^(a)\1$", "nn")
    with pytest.raises(ValueError, match="unknown integration path"):
        rule_check(r"^x", "compile")


def test_a_stored_pattern_re2_refuses_matches_nothing_rather_than_failing_the_page():
    PathRule.objects.create(position=1, pattern=r"(?<=x)test", path="nn")
    assert path_of("test_autograd", rules()) == "autograd"


def test_the_admin_adds_a_rule_and_refuses_a_pattern_re2_will_not_run(admin_client):
    url = reverse("admin:relay_pathrule_add")
    refused = admin_client.post(url, {"position": 0, "pattern": r"(?=a)b", "path": "nn"})
    assert refused.status_code == 200 and "not a pattern RE2 runs" in refused.content.decode()
    assert not PathRule.objects.exists()
    added = admin_client.post(url, {"position": 0, "pattern": r"^test_cuda$", "path": "eager ops"})
    assert added.status_code == 302
    assert path_of("test_cuda", rules()) == "eager ops"
