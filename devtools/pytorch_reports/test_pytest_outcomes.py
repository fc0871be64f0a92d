"""pytest's own outcome shapes, which unittest-style tests cannot produce: an xfail with a reason,
a strict xfail that passes, an error in a fixture's setup, and a function test parametrized
with the device in pytest's bracket ids. Copied next to test_device_generic.py."""

import device_setup
import pytest

DEVICE = device_setup.DEVICE


@pytest.fixture
def second_device():
    raise RuntimeError(f"{DEVICE}:1 is not available")


@pytest.mark.xfail(reason="upstream issue 1234")
def test_layout_roundtrip():
    assert [1, 2] == [2, 1]


@pytest.mark.xfail(reason="fixed upstream?", strict=True)
def test_strict_xfail_passes():
    assert True


def test_peer_copy(second_device):
    assert second_device


@pytest.mark.parametrize("device", ["cpu", DEVICE])
@pytest.mark.parametrize("op", ["add", "matmul"])
def test_op_on(op, device):
    assert not (op == "matmul" and device != "cpu"), f"{op} is wrong on {device}"
