"""A failure's reason from its message: the same bug on other tests, backends and runs reads as
one line; PyTorch's words for a missing operator name the operator."""

import time

import pytest

from relay.policy.reasons import MISSING_OPERATOR, REASON, normalise, reason_of

# PyTorch's own texts (c10 dispatcher, MPS, the CPU fallback's warning as torch prints them).
COULD_NOT_RUN = (
    "NotImplementedError: Could not run 'aten::_fft_c2c' with arguments from the 'XPU' backend. This could be "
    "because the operator doesn't exist for this backend, or was omitted during the selective/custom build "
    "process (if using custom build). If you are a Facebook employee using PyTorch on mobile, please visit "
    "https://fburl.com/ptmfixes for possible resolutions. 'aten::_fft_c2c' is only available for these "
    "backends: [CPU, CUDA, Meta, BackendSelect, Python, FuncTorchDynamicLayerBackMode, Functionalize]."
)
NOT_IMPLEMENTED = (
    "NotImplementedError: The operator 'aten::_linalg_eigvals' is not currently implemented for the MPS device. "
    "If you want this op to be considered for addition please comment on "
    "https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that resulted in missing op as well "
    "as commit hash 2236df1770800ffea5697b11b0bb0d910b2e59e1."
)
FALLBACK = (
    "UserWarning: The operator 'aten::bitwise_and.Tensor_out' is not currently supported on the MPS backend and "
    "will fall back to run on the CPU. This may have performance implications. (Triggered internally at "
    "/Users/runner/work/pytorch/pytorch/pytorch/aten/src/ATen/mps/MPSFallback.mm:11.)"
)


@pytest.mark.parametrize(
    ("message", "operator", "device"),
    [
        (COULD_NOT_RUN, "aten::_fft_c2c", "XPU"),
        (NOT_IMPLEMENTED, "aten::_linalg_eigvals", "MPS"),
        (FALLBACK, "aten::bitwise_and.Tensor_out", "MPS"),
        (
            "NotImplementedError: Could not run 'aten::view' with arguments from the 'AutogradPrivateUse1' backend.",
            "aten::view",
            "AutogradPrivateUse1",
        ),
    ],
)
def test_pytorchs_missing_operator_messages_name_the_operator(message, operator, device):
    reason = reason_of(message)
    assert (reason.kind, reason.operator, reason.signature, reason.device) == (
        MISSING_OPERATOR,
        operator,
        operator,
        device,
    )


def test_one_missing_operator_on_two_backends_is_one_cause():
    other = COULD_NOT_RUN.replace("'XPU'", "'PrivateUse1'")
    assert reason_of(COULD_NOT_RUN).digest == reason_of(other).digest


def test_a_missing_operator_found_in_the_stack_when_the_message_is_short():
    reason = reason_of("NotImplementedError", "Traceback (most recent call last):\n  ...\n" + COULD_NOT_RUN)
    assert reason.operator == "aten::_fft_c2c"


def test_numbers_shapes_dtypes_and_devices_vary_but_the_reason_does_not():
    one = reason_of("RuntimeError: expected shape [2, 3] on xpu:0 for torch.float32, got 0x7f3a2b10 (1e-05)")
    two = reason_of("RuntimeError: expected shape [16, 8, 4] on cuda:1 for torch.bfloat16, got 0x55aa (0.25)")
    assert one.digest == two.digest
    assert (one.kind, one.exception, one.signature) == (
        REASON,
        "RuntimeError",
        "expected shape <shape> on <device> for <dtype>, got <addr> (<n>)",
    )
    assert one.example.startswith("expected shape [2, 3]")


def test_paths_and_hex_ids_are_placeholders_but_words_of_hex_letters_stay():
    assert normalise("failed at /tmp/work/test_ops.py:42 in job a1b2c3d4e5f6 (added, cafe)") == (
        "failed at <path> in job <hex> (added, cafe)"
    )


def test_the_first_meaningful_line_is_the_reason_and_the_rest_is_left_out():
    message = (
        "AssertionError: Tensor-likes are not close!\n\nMismatched elements: 2 / 2 (100.0%)\n"
        "Greatest absolute difference: 1.0 at index (0,) (up to 1e-05 allowed)"
    )
    assert reason_of(message).signature == "Tensor-likes are not close!"


def test_a_message_without_its_type_takes_it_from_the_stack():
    stack = 'Traceback (most recent call last):\n  File "test/test_ops.py", line 3\nAssertionError: Tensor-likes are not close!'
    reason = reason_of("Tensor-likes are not close!", stack)
    assert (reason.exception, reason.signature) == ("AssertionError", "Tensor-likes are not close!")


def test_pytests_setup_wrapper_is_read_for_the_error_inside():
    one = reason_of('failed on setup with "RuntimeError: xpu:1 is not available"')
    two = reason_of('failed on setup with "RuntimeError: npu:1 is not available"')
    assert (one.exception, one.signature, one.digest) == ("RuntimeError", "<device> is not available", two.digest)


def test_different_reasons_stay_apart():
    assert reason_of("IndexError: index 5 is out of bounds").digest != reason_of("KeyError: index 5").digest
    assert reason_of("").signature == "(no message)"


def test_outside_text_costs_linear_time_and_bounded_input():
    hostile = "RuntimeError: " + "(1, " * 200_000 + "a/" * 200_000
    start = time.perf_counter()
    reason = reason_of(hostile, hostile)
    assert time.perf_counter() - start < 0.5
    assert len(reason.signature) <= 300 and len(reason.example) <= 300


def test_a_backends_own_device_word_is_a_device_word():
    one = reason_of("RuntimeError: acme:0 is not available", device_word="acme")
    two = reason_of("RuntimeError: xpu:1 is not available")
    assert one.digest == two.digest


def test_urls_are_placeholders_and_a_drive_letter_needs_a_word_start():
    assert normalise("see http://evil.example/x?y=1 and C:/work/a.py") == "see <url> and <path>"
