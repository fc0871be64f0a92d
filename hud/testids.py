"""One test id across devices.

PyTorch's device-generic tests are instantiated once per device: `TestFoo` becomes `TestFooXPU`,
`TestFooCUDA`, `TestFooPRIVATEUSE1` (or `TestFooOPENREG` once the backend is renamed), and each
method gets the device spliced in after its parametrize suffixes and before its dtype:
`test_add` → `test_add_xpu_float32`. To compare one backend's failures with the reference's we
remove exactly that instantiation suffix, once, and keep dtypes and parameters:

    TestFooXPU.test_add_xpu_float32 ≡ TestFooPRIVATEUSE1.test_add_privateuse1_float32 → TestFoo.test_add_float32

Names that merely contain a device word stay as they are: `test_cudagraph_trees` (no word
boundary), `TestMPSGraph` (not a suffix), `TestMPS` (nothing would be left), and a method of a class
that was not instantiated per device (`TestCuda.test_to_cuda`) keeps its name. CPU is deliberately
not a device here: a CPU-instantiated test is a different test from its accelerator twin, and both
may run in the same job."""

import re

DEVICES = ("privateuse1", "openreg", "cuda", "xpu", "mps", "hpu", "mtia")

_CLASS_SUFFIX = re.compile(r"(?:%s)$" % "|".join(d.upper() for d in DEVICES))
_METHOD_SUFFIX = re.compile(r"_(?:%s)(?=_|$)" % "|".join(DEVICES))
_GENERIC_CLASS_NAMES = {"", "Test"}


def normalize_test_id(name: str, classname: str = "") -> str:
    """`classname.name` with the per-device instantiation suffixes removed (see module doc).
    `name` may itself carry the class, dotted (`TestFooXPU.test_x`) or as a pytest node id."""
    name, params = _split_params((name or "").strip())
    classname = (classname or "").strip()
    if not classname:
        classname, name = _split_qualified(name)
    prefix, cls = _split_last(classname)
    bare_cls = _strip_class_suffix(cls)
    if bare_cls != cls or not cls:
        name = _strip_method_suffix(name)
    return ".".join(part for part in (prefix, bare_cls, name + params) if part)


def _split_params(name: str) -> tuple[str, str]:
    """pytest's `test_x[param-ids]` keeps its bracket untouched: ids there are parameters."""
    bracket = name.find("[")
    return (name, "") if bracket < 0 else (name[:bracket], name[bracket:])


def _split_qualified(name: str) -> tuple[str, str]:
    if "::" in name:
        head, _, method = name.rpartition("::")
        return head.replace("::", "."), method
    head, _, method = name.rpartition(".")
    return head, method


def _split_last(classname: str) -> tuple[str, str]:
    head, _, cls = classname.replace("::", ".").rpartition(".")
    return head, cls


def _strip_class_suffix(cls: str) -> str:
    bare = _CLASS_SUFFIX.sub("", cls)
    return cls if bare in _GENERIC_CLASS_NAMES else bare


def _strip_method_suffix(method: str) -> str:
    """Only the last device word is the instantiation suffix: `test_to_cuda_xpu_float32` ran
    the upstream test `test_to_cuda` on XPU."""
    matches = list(_METHOD_SUFFIX.finditer(method))
    if not matches:
        return method
    last = matches[-1]
    return method[: last.start()] + method[last.end():]
