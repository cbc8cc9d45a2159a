"""Op and kernel accounting (autograder/worker/accounting.py), in process: every route to a forbidden op is
seen, `oracle()` lifts it only for test code, switching the profiler off is tampering, and
`measure` audits the timed function. Oracle: the op names torch's own profiler reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch
import torch.nn.functional as F

from autograder.host.spec import AccountingRules, parse_spec
from autograder.protocol.rules import matches
from autograder.testing import oracle
from autograder.timing import measure
from autograder.worker import accounting
from autograder.worker.accounting import Accountant

SDPA_RULES = AccountingRules(forbidden_ops=("aten::*scaled_dot_product*",), forbidden_kernels=("*fmha*",))


def _qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 8, 4, generator=g) for _ in range(3)]


def _account(fn, rules=SDPA_RULES, package="studentpkg", required=()) -> str:
    acct = Accountant(rules, package, required)
    acct.begin()
    try:
        fn()
    finally:
        verdict = acct.end()
    return verdict


@pytest.mark.parametrize("route", [
    lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    lambda q, k, v: torch.ops.aten.scaled_dot_product_attention(q, k, v),
    lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math(q, k, v),
    lambda q, k, v: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v),
    lambda q, k, v: torch._C._nn.scaled_dot_product_attention(q, k, v),
], ids=["functional", "aten", "aten_math_fallback", "aten_cpu_flash", "torch_C_nn"])
def test_every_route_to_a_forbidden_op_is_seen(route):
    verdict = _account(lambda: route(*_qkv()))
    assert "scaled_dot_product" in verdict and "forbidden here" in verdict


def test_disabling_python_dispatch_does_not_hide_an_op():
    def sneaky():
        with torch._C._DisableTorchDispatch():
            torch.ops.aten.scaled_dot_product_attention(*_qkv())

    assert "scaled_dot_product" in _account(sneaky)


def test_plain_math_passes_rules_that_forbid_only_attention_ops():
    q, k, v = _qkv()
    assert _account(lambda: torch.softmax(q @ k.transpose(-1, -2), -1) @ v) == ""


def test_the_oracle_block_is_not_accounted_to_the_submission():
    def test_body():
        with oracle():
            out = F.scaled_dot_product_attention(*_qkv())
        return out.sum()

    assert _account(test_body) == ""


def test_ops_after_the_oracle_block_are_recorded_again():
    def test_body():
        with oracle():
            F.scaled_dot_product_attention(*_qkv())
        torch.ops.aten.scaled_dot_product_attention(*_qkv())

    assert "scaled_dot_product" in _account(test_body)


def test_the_submission_cannot_lift_the_accounting_with_oracle():
    module = types.ModuleType("studentpkg.attn")
    exec(textwrap.dedent("""
        import torch.nn.functional as F
        from autograder.testing import oracle

        def attention(q, k, v):
            with oracle():
                return F.scaled_dot_product_attention(q, k, v)
    """), module.__dict__)
    verdict = _account(lambda: module.attention(*_qkv()))
    assert "studentpkg.attn called autograder.testing.oracle()" in verdict
    assert "scaled_dot_product" in verdict


def test_the_submission_cannot_pause_the_accounting_itself():
    module = types.ModuleType("studentpkg.sneaky")
    exec(textwrap.dedent("""
        import torch.nn.functional as F
        from autograder.worker import accounting

        def attention(q, k, v):
            with accounting.current().paused():
                return F.scaled_dot_product_attention(q, k, v)
    """), module.__dict__)
    verdict = _account(lambda: module.attention(*_qkv()))
    assert "studentpkg.sneaky tried to pause the op accounting (tampering)" in verdict
    assert "scaled_dot_product" in verdict


def test_switching_the_profiler_off_is_reported_as_tampering():
    def tamper():
        torch.autograd._disable_profiler()
        F.scaled_dot_product_attention(*_qkv())

    assert "tampering" in _account(tamper)


def test_measure_audits_one_call_and_times_the_rest_unrecorded():
    calls = []

    def fn():
        calls.append(torch.autograd._profiler_enabled())
        torch.ops.aten.scaled_dot_product_attention(*_qkv())

    acct = Accountant(SDPA_RULES, "studentpkg", ())
    acct.begin()
    with pytest.raises(RuntimeError, match="perf audit: .*scaled_dot_product"):  # stops the test at once
        measure(fn, warmup=0, reps=4)
    verdict = acct.end()
    assert calls == [False] * 4 + [True], "the four timed calls run unprofiled, the audit call profiled"
    assert "scaled_dot_product" in verdict


def test_measure_of_an_oracle_baseline_is_not_audited():
    def test_body():
        with oracle():
            measure(lambda: F.scaled_dot_product_attention(*_qkv()), warmup=0, reps=2)

    assert _account(test_body) == ""


def test_no_accountant_outside_a_test():
    assert accounting.current() is None
    _account(lambda: None)
    assert accounting.current() is None


def test_patterns_match_case_insensitively():
    assert matches("cunn_SoftMaxForward", ("*softmax*",)) == "*softmax*"
    assert matches("aten::mm", ("aten::mm",)) and not matches("aten::mm_out", ("aten::mm",))


def test_spec_reads_and_validates_the_accounting_table():
    head = {"assignment": {"id": "p6_x", "title": "t", "stage": 4, "package": "x", "editable": ["x/*.py"]}}
    spec = parse_spec({**head, "accounting": {"forbidden_ops": ["aten::mm"], "require_kernels": ["x.k"]}})
    assert spec.accounting.forbidden_ops == ("aten::mm",) and spec.accounting.require_kernels == ("x.k",)
    with pytest.raises(ValueError, match="namespace"):
        parse_spec({**head, "accounting": {"forbidden_ops": ["mm"]}})
    with pytest.raises(ValueError, match="not inside package"):
        parse_spec({**head, "accounting": {"require_kernels": ["other"]}})
    with pytest.raises(ValueError, match=r"\[accounting\]: unknown key 'forbid'"):
        parse_spec({**head, "accounting": {"forbid": ["aten::mm"]}})


KERNEL_CHILD = r"""
import json, sys, torch, triton, triton.language as tl
from autograder.worker.accounting import Accountant
from autograder.host.spec import AccountingRules
sys.path.insert(0, sys.argv[1])
from kpkg.kern import copy

rules = AccountingRules(require_kernels=("kpkg",))
out = {}
for case, body in {"launched": lambda: copy(torch.arange(8.0)), "torch_only": lambda: torch.arange(8.0) * 1}.items():
    acct = Accountant(rules, "kpkg", rules.require_kernels)
    acct.begin()
    body()
    out[case] = [acct.end(), sorted(acct.ledger.launches)]
print(json.dumps(out))
"""

KERNEL_MODULE = """
import torch, triton, triton.language as tl

@triton.jit
def _copy_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)

def copy(x):
    y = torch.empty_like(x)
    _copy_kernel[(1,)](x, y, x.numel(), BLOCK=8)
    return y


def copy_then_exp(x):
    return copy(x).exp()


def read_every_element(x):
    copy(x)
    return [float(v) for v in x]


def sum_in_numpy(x):
    copy(x)
    return float(x.numpy().sum())


def sum_on_host(x):
    copy(x)
    return x.cpu().sum()


_SMUGGLED = {}


@triton.jit
def _torch_in_the_body(X):
    _SMUGGLED["out"] = torch.exp(_SMUGGLED["x"])  # plain Python under the interpreter


def exp_inside_a_kernel(x):
    _SMUGGLED["x"] = x
    _torch_in_the_body[(1,)](x)
    return _SMUGGLED["out"]


def exp_in_the_grid(x):
    y = torch.empty_like(x)

    def grid(meta):  # the launch calls this Python inside JITFunction.run
        _SMUGGLED["out"] = torch.exp(x)
        return (1,)

    _copy_kernel[grid](x, y, x.numel(), BLOCK=8)
    return _SMUGGLED["out"]
"""

ALLOWLIST_CHILD = r"""
import json, sys, torch
from autograder.worker.accounting import Accountant
from autograder.host.spec import AccountingRules
sys.path.insert(0, sys.argv[1])
from kpkg.kern import copy, copy_then_exp, exp_in_the_grid, exp_inside_a_kernel, read_every_element, sum_in_numpy, sum_on_host

rules = AccountingRules(require_kernels=("kpkg",), compute_in_kernels=True)
x = torch.arange(8.0)
out = {}
cases = {"kernel_only": lambda: copy(x.reshape(2, 4).reshape(-1).contiguous()),
                   "exp_beside_kernel": lambda: copy_then_exp(x),
                   "scalars": lambda: read_every_element(torch.arange(64.0)),
                   "numpy": lambda: sum_in_numpy(x),
                   "torch_in_kernel_body": lambda: exp_inside_a_kernel(x),
                   "torch_in_grid": lambda: exp_in_the_grid(x)}
if sys.argv[2:] == ["cuda"]:
    xc = x.cuda()
    cases = {"kernel_only": lambda: copy(xc), "cpu_side_door": lambda: sum_on_host(xc),
             "torch_in_grid": lambda: exp_in_the_grid(xc)}
for case, body in cases.items():
    acct = Accountant(rules, "kpkg", rules.require_kernels)
    acct.begin()
    body()
    out[case] = acct.end()
print(json.dumps(out))
"""


def _kpkg_child(tmp_path, child: str, *args: str, interpret: bool = True) -> dict:
    """Run `child` over a package kpkg holding KERNEL_MODULE; its last output line is JSON."""
    (tmp_path / "kpkg").mkdir()
    (tmp_path / "kpkg" / "__init__.py").write_text("")
    (tmp_path / "kpkg" / "kern.py").write_text(KERNEL_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | ({"TRITON_INTERPRET": "1"} if interpret else {})
    run = subprocess.run([sys.executable, "-c", child, str(tmp_path), *args], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_kernel_exercise_may_only_allocate_view_copy_and_cast_outside_its_kernels(tmp_path):
    """Under the interpreter the kernel's own tensor work is inside its launch; `exp` beside the
    kernel is named with the package line that called it; a loop of scalar reads is refused.
    Oracle: the op names torch's profiler reports, and the line numbers of the module above."""
    out = _kpkg_child(tmp_path, ALLOWLIST_CHILD)
    assert out["kernel_only"] == ""
    exp_line = KERNEL_MODULE.splitlines().index("    return copy(x).exp()") + 1
    assert "aten::exp" in out["exp_beside_kernel"] and f"kpkg/kern.py:{exp_line}" in out["exp_beside_kernel"]
    assert "outside its own Triton kernels" in out["exp_beside_kernel"]
    assert "read 64 scalars" in out["scalars"]
    assert "a tensor left torch" in out["numpy"]
    assert "aten::exp" in out["torch_in_kernel_body"]  # an interpreted body is no hiding place
    assert "aten::exp" in out["torch_in_grid"]  # nor is a grid callable


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_a_compiled_launch_exempts_nothing_and_moving_a_gpu_tensor_to_the_host_fails(tmp_path):
    """A compiled launch issues no dispatcher op (the kernel alone passes with nothing exempt), the
    Python it runs is accounted (torch.exp in a grid callable), and .cpu() of a GPU tensor is named."""
    out = _kpkg_child(tmp_path, ALLOWLIST_CHILD, "cuda", interpret=False)
    assert out["kernel_only"] == ""
    assert "aten::exp" in out["torch_in_grid"]
    line = KERNEL_MODULE.splitlines().index("    return x.cpu().sum()") + 1
    assert "moved a GPU tensor to the host" in out["cpu_side_door"] and f"kpkg/kern.py:{line}" in out["cpu_side_door"]


def test_widening_the_allowlist_needs_a_reason():
    head = {"assignment": {"id": "p6_x", "title": "t", "stage": 4, "package": "x", "editable": ["x/*.py"]}}
    table = {"require_kernels": ["x"], "compute_in_kernels": True, "allow_ops": {"aten::cumsum": "block offsets"}}
    spec = parse_spec({**head, "accounting": table})
    assert spec.accounting.compute_in_kernels and matches("aten::cumsum", spec.accounting.allowed_ops)
    with pytest.raises(ValueError, match="reason"):
        parse_spec({**head, "accounting": {**table, "allow_ops": {"aten::cumsum": " "}}})
    with pytest.raises(ValueError, match="needs require_kernels"):
        parse_spec({**head, "accounting": {"compute_in_kernels": True}})


def test_a_required_kernel_must_launch_under_the_triton_interpreter(tmp_path):
    out = _kpkg_child(tmp_path, KERNEL_CHILD)
    assert out["launched"] == ["", ["kpkg.kern._copy_kernel"]]
    assert out["torch_only"][0] == "no Triton kernel of kpkg ran: this exercise is to write it"


# ---- GPU tier: run with `pytest tests/test_accounting.py` on a CUDA machine --------------------
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_cuda
def test_a_backward_on_the_autograd_thread_is_recorded():
    # On CUDA the autograd engine runs backward ops on its own device thread.
    q, k, v = (t.cuda().half().requires_grad_() for t in _qkv())

    def body():
        out = torch.ops.aten.scaled_dot_product_attention(q, k, v)
        out.sum().backward()

    rules = AccountingRules(forbidden_ops=("aten::*scaled_dot_product*backward*",))
    assert "backward" in _account(body, rules=rules)


@needs_cuda
def test_the_perf_audit_names_library_kernels_and_replayed_graph_kernels(tmp_path):
    q, k, v = (torch.randn(4, 8, 512, 64, device="cuda", dtype=torch.half) for _ in range(3))
    rules = AccountingRules(forbidden_kernels=("*flash*", "*fmha*", "*cudnn*", "*efficient_attention*"))
    acct = Accountant(rules, "nopkg", ())
    acct.begin()
    with pytest.raises(RuntimeError, match="library kernel"):
        measure(lambda: F.scaled_dot_product_attention(q, k, v), warmup=1, reps=3)
    assert "library kernel" in acct.end(), "SDPA's kernels must show in the audit by name"

    x = torch.randn(1 << 20, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * 2
    acct = Accountant(AccountingRules(forbidden_kernels=("*elementwise*",)), "nopkg", ())
    acct.begin()
    with pytest.raises(RuntimeError, match="elementwise"):
        measure(graph.replay, warmup=1, reps=3)
    verdict = acct.end()
    assert y.shape == x.shape and "elementwise" in verdict, "kernels of a replayed graph must show by name"


def test_profiler_log_lines_are_dropped_from_a_students_output():
    from autograder.judge.verdict import PROFILER_LOG as _PROFILER_LOG

    noisy = ("E   assert 1 == 2\nUSDT:2026-12-01 10:37:00 14401:14401 SyncActivityProfilerHandler.cpp:52] "
             "profiler_start\nINFO:2026-12-01 10:37:04 14409:14409 init.cpp:148] Registering daemon\nE   more\n")
    assert _PROFILER_LOG.sub("", noisy) == "E   assert 1 == 2\nE   more\n"


def test_a_decoy_kernel_beside_library_kernels_fails_the_gpu_time_share():
    """The share is the ledger's own arithmetic: own-kernel nanoseconds over all audited ones."""
    from collections import Counter

    from autograder.protocol.rules import Ledger, verdict

    rules = AccountingRules(require_kernels=("fa",), compute_in_kernels=True)
    own = {"_attn_fwd": "fa.forward"}
    decoy = Ledger(own_kernels=own, device_ns=Counter({"_attn_fwd": 10_000, "sm90_xmma_gemm": 80_000,
                                                      "Memset (Device)": 10_000}))
    assert "took 10% of the GPU time" in verdict(decoy, rules, ("fa",))
    launched = Counter({"fa.forward._attn_fwd": 1})
    honest = Ledger(launches=launched, own_kernels=own,
                    device_ns=Counter({"_attn_fwd": 95_000, "Memset (Device)": 5_000}))
    assert verdict(honest, rules, ("fa",)) == ""
    assert verdict(Ledger(launches=launched, own_kernels=own), rules, ("fa",)) == ""  # no GPU audit
