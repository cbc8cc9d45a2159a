"""Submissions that skip the exercise (tests/fixtures/wrong_approach/) earn none of the points of the
tests they sidestep. Each is graded end to end twice on the CPU: with the assignment's accounting
rules off, to show its answers are right (the sidestep works, so only the accounting can refuse
it), and with them on, where the sidestepped tests must earn nothing and name why."""

from __future__ import annotations

import dataclasses
import shutil
import tomllib
from pathlib import Path

import pytest

from autograder.host.course_files import ignore
from autograder.host.grade import grade_assignment
from autograder.hardware import has_cuda
from autograder.host.repo import Course, find_root
from autograder.host.spec import AccountingRules

COURSE = Course(find_root())


@dataclasses.dataclass(frozen=True)
class _Relaxed(Course):
    """The course with the rules the flags leave out removed from every assignment: by default its
    accounting rules (a submission graded as if nothing watched how it computes), and with
    keep_forbidden=False its forbidden names too (a library layer run where the assignment forbids it)."""

    keep_accounting: bool = False
    keep_forbidden: bool = True

    def spec(self, assignment_id):
        spec = super().spec(assignment_id)
        if not self.keep_accounting:
            spec = dataclasses.replace(spec, accounting=AccountingRules())
        if not self.keep_forbidden:
            spec = dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, forbidden=()))
        return spec

CORPUS = Path(__file__).parent / "fixtures" / "wrong_approach"
ACCOUNTING_REASONS = ("forbidden here", "no Triton kernel of", "outside its own Triton kernels")


def _submission(tmp_path: Path, aid: str, case: str, base: str) -> Path:
    """The case's files laid over the untouched stub or over the reference: its own .py files, those
    of `<assignment prefix>_common/`, and files made from the reference by its replace.toml; the
    reference's analysis answers in either case."""
    sub = tmp_path / aid
    source = COURSE.student_dir(aid) if base == "stub" else COURSE.solution_dir(aid)
    shutil.copytree(source, sub, ignore=ignore("hidden"))
    answers = COURSE.solution_dir(aid) / "answers"
    if answers.is_dir():  # the analysis is not what these cases sidestep: give them the reference's
        shutil.copytree(answers, sub / "answers", dirs_exist_ok=True)
    for folder in (CORPUS / f"{aid.split('_')[0]}_common", CORPUS / case):
        for path in folder.rglob("*.py"):
            (sub / path.relative_to(folder)).write_bytes(path.read_bytes())
    replacements = CORPUS / case / "replace.toml"
    for entry in tomllib.loads(replacements.read_text())["replace"] if replacements.is_file() else []:
        text = strip_markers((COURSE.solution_dir(aid) / entry["file"]).read_text())
        assert text.count(entry["find"]) == 1, f"{case}: `find` must occur once in {entry['file']}"
        (sub / entry["file"]).write_text(text.replace(entry["find"], entry["replace"]))
    return sub


def strip_markers(text: str) -> str:
    """Reference code with its solution-marker lines dropped (the bodies stay)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if line.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION"))


def _analysis(result) -> bool:
    """An analysis test (numbers about the student's run, no kernel of theirs needed): the cases
    carry the reference's answers, so these pass with or without the accounting."""
    return result.test.file.endswith("test_analysis_hidden.py")


def _code_score(results) -> tuple[float, float]:
    """(points earned, points graded) over the tests of the code, the analysis left out."""
    code = [t for t in results if t.graded and not _analysis(t)]
    return sum(t.score for t in code), sum(t.test.points for t in code)


def _grade(sub: Path, aid: str, accounting: bool, only_files: list[str] | None = None):
    course = COURSE if accounting else _Relaxed(COURSE.root)
    result = grade_assignment(course=course, assignment_id=aid, submission=sub, sandbox="auto", hardware="cpu",
                              only_files=only_files)
    graded = [t for t in result.tests if t.graded]
    assert graded and len(result.tests) == len({t.test.nodeid for t in result.tests})
    return result, graded


@pytest.mark.parametrize(("case", "aid"), [
    ("p6_torch_aten", "p6_flashattn"),
    ("p6_torch_math", "p6_flashattn"),
    ("s04_torch_ops", "s04_kernels"),
    ("p6_composed_math", "p6_flashattn"),
    ("s04_composed_ops", "s04_kernels"),
])
def test_a_submission_without_kernels_earns_nothing(case, aid, tmp_path):
    sub = _submission(tmp_path, aid, case, "stub")
    unchecked, graded = _grade(sub, aid, accounting=False)
    implemented = [t for t in unchecked.tests if t.graded]
    earned, out_of = sum(t.score for t in implemented), sum(t.test.points for t in implemented)
    assert earned >= 0.9 * out_of, f"the wrong approach should give right answers: {earned}/{out_of}"
    result, graded = _grade(sub, aid, accounting=True)
    score, max_score = _code_score(graded)
    assert score <= 0.1 * max_score, f"{case} earned {score}/{max_score}"
    sidestepped = {t.test.nodeid for t in unchecked.tests if t.graded and t.score > 0 and not _analysis(t)}
    for t in graded:
        if t.test.nodeid in sidestepped:
            assert t.score == 0, f"{t.test.nodeid} earned {t.score}"
            assert any(r in t.reason for r in ACCOUNTING_REASONS), f"{t.test.nodeid}: {t.reason!r}"


def test_a_kernel_exercise_importing_an_array_library_is_not_graded(tmp_path):
    """numpy on the host computes without a torch op to account: the import alone refuses the package."""
    sub = _submission(tmp_path, "s04_kernels", "s04_numpy", "reference")
    result, graded = _grade(sub, "s04_kernels", accounting=True)
    assert result.score == 0 and all("may not import an array library" in t.reason for t in graded)
    assert "tritonkernels/softmax.py:3: imports numpy" in graded[0].reason


def test_paged_attention_by_sdpa_earns_nothing_over_the_stub(tmp_path):
    """The stub with only the attention tasks done: store_kvcache (written honestly) keeps its
    point, the paged-attention tests that SDPA would pass earn nothing."""
    aid = "p1_minivllm"
    sub = _submission(tmp_path, aid, "p1_sdpa_paged_attention", "stub")
    files = ["tests/test_kernels.py", "hidden/test_units_hidden.py"]  # the units; the stub's engine runs nothing
    unchecked, _ = _grade(sub, aid, accounting=False, only_files=files)
    sidestepped = {t.test.nodeid for t in unchecked.tests if t.graded and t.score > 0 and "paged_attention" in t.test.nodeid}
    assert sidestepped, "SDPA on gathered KV should pass the paged-attention tests without accounting"
    result, graded = _grade(sub, aid, accounting=True, only_files=files)
    score, max_score = _code_score(graded)
    assert score <= 0.1 * max_score, f"{score}/{max_score}"
    for t in graded:
        if t.test.nodeid in sidestepped:
            assert t.score == 0 and "scaled_dot_product" in t.reason, f"{t.test.nodeid}: {t.reason!r}"


def test_paged_attention_by_sdpa_loses_exactly_the_tests_that_run_it(tmp_path):
    """Over the reference, the tests that never run paged_attention (KV stores, the step's model input,
    the sampler) keep their points; every test whose engine or kernel call runs it loses its points
    to the accounting."""
    aid = "p1_minivllm"
    sub = _submission(tmp_path, aid, "p1_sdpa_paged_attention", "reference")
    unchecked, _ = _grade(sub, aid, accounting=False)
    assert unchecked.score == unchecked.max_score
    result, graded = _grade(sub, aid, accounting=True)
    by_file: dict[str, list] = {}
    for t in graded:
        by_file.setdefault(t.test.file, []).append(t)
    kept = [t for t in by_file["tests/test_kernels.py"] if "paged_attention" not in t.test.nodeid]
    assert len(kept) >= 6 and all(t.score == t.test.points for t in kept), [t.test.nodeid for t in kept]
    for t in by_file["tests/test_engine.py"]:
        assert t.score == 0 and "scaled_dot_product" in t.reason, t.test.nodeid
    paged = [t for t in graded if "paged_attention" in t.test.nodeid]
    assert paged and all(t.score == 0 for t in paged)


@pytest.mark.skipif(not has_cuda(), reason="GPU tier: run on a CUDA machine")
@pytest.mark.parametrize(("case", "aid", "base"), [
    ("p6_torch_aten", "p6_flashattn", "stub"),
    ("p6_torch_math", "p6_flashattn", "stub"),
    ("s04_torch_ops", "s04_kernels", "stub"),
    ("p6_composed_math", "p6_flashattn", "stub"),
    ("s04_composed_ops", "s04_kernels", "stub"),
    ("p1_sdpa_paged_attention", "p1_minivllm", "reference"),
])
def test_wrong_approaches_earn_nothing_on_the_gpu(case, aid, base, tmp_path):
    """Graded with the GPU and perf tiers (bars of the detected hardware): every GPU test, perf
    tests included, earns nothing, whatever ratio the library code reached."""
    sub = _submission(tmp_path, aid, case, base)
    result = grade_assignment(course=COURSE, assignment_id=aid, submission=sub, sandbox="auto")
    on_gpu = [t for t in result.tests if t.test.gpu]
    assert on_gpu and all(t.graded for t in on_gpu), [t.reason for t in on_gpu if not t.graded][:3]
    for t in on_gpu:
        print(f"{case} {t.test.nodeid}: {t.score:g}/{t.test.points:g} {t.metrics} {t.reason[:160]}")
    assert all(t.score == 0 for t in on_gpu), [(t.test.nodeid, t.score) for t in on_gpu if t.score]
    if base == "stub":
        score, max_score = _code_score(result.tests)
        assert score <= 0.1 * max_score, f"{score}/{max_score}"


def test_dequantize_then_matmul_earns_nothing_for_the_w4a16_kernel(tmp_path):
    """Over the reference: w4a16_matmul unpacks the 4-bit weight in torch and calls matmul. Its answers
    are right; every kernel test (the engine's W4A16 layer's included) loses its points to the accounting,
    and GPTQ's, the packing's and the engine's serving tests (no kernel required) keep theirs."""
    aid = "p3_gptq"
    sub = _submission(tmp_path, aid, "p3_torch_dequant", "reference")
    # the kernel's and the layer's tests, and torch-code tests beside them (not the course model's and
    # the engine's serving tests: slow, and no different here from GPTQ's)
    files = ["tests/test_w4a16.py", "hidden/test_w4a16_hidden.py", "tests/test_engine.py", "tests/test_gptq.py",
             "tests/test_pack.py", "hidden/test_gptq_hidden.py"]
    unchecked, _ = _grade(sub, aid, accounting=False, only_files=files)
    assert unchecked.score == unchecked.max_score, [t.reason for t in unchecked.tests if t.graded and not t.score]
    result, graded = _grade(sub, aid, accounting=True, only_files=files)
    # the kernel's own tests, and the engine layer's, which requires the kernel (the engine's serving
    # tests require none: the layer's test is the one that grades the kernel there)
    kernel_tests = [t for t in graded if "w4a16" in t.test.nodeid]
    gemm = [t for t in kernel_tests if t.score < t.test.points]  # the ones that multiply: refused
    assert all(t.score == 0 and any(r in t.reason for r in ACCOUNTING_REASONS) for t in gemm), gemm[0].reason
    kept = sum(t.score for t in kernel_tests)  # argument checks, empty inputs, the split-K choice
    assert kept <= 0.25 * sum(t.test.points for t in kernel_tests), [t.test.nodeid for t in kernel_tests if t.score]
    others = [t for t in graded if "w4a16" not in t.test.nodeid]
    assert others and all(t.score == t.test.points for t in others), [t.test.nodeid for t in others if not t.score]


def test_counting_parameters_with_the_transformers_model_earns_nothing_for_the_counts(tmp_path):
    """Over the reference: param_count builds transformers' model on the meta device and counts it.
    Its counts are right; every test that calls it for a total (directly or through the memory
    budget) loses its points to the accounting, and the rest of the assignment keeps them."""
    aid = "s12_architectures"
    sub = _submission(tmp_path, aid, "s12_transformers_count", "reference")
    files = ["tests/test_params.py", "tests/test_memory.py", "tests/test_arch.py"]
    unchecked, _ = _grade(sub, aid, accounting=False, only_files=files)
    assert unchecked.score == unchecked.max_score, [t.reason for t in unchecked.tests if t.graded and not t.score]
    result, graded = _grade(sub, aid, accounting=True, only_files=files)
    counted = [t for t in graded if "param_count" in t.test.nodeid or "published" in t.test.nodeid
               or "mixtral_total" in t.test.nodeid or "reports" in t.test.nodeid or "deepseek_v3_main" in t.test.nodeid or "80_gb" in t.test.nodeid]
    assert len(counted) == 11
    for t in counted:
        assert t.score == 0 and "forbidden here" in t.reason, (t.test.nodeid, t.reason[:200])
    assert all(t.score == t.test.points for t in graded if t not in counted)


def test_asking_hta_for_the_timeline_earns_nothing_for_it(tmp_path):
    """Over the reference: temporal_breakdown asks Holistic Trace Analysis (the tests' oracle) instead
    of merging intervals. Its answers are right with HTA allowed; with the assignment's forbidden
    list, the tests that call it earn nothing and say why, and the rest keep their points."""
    aid = "s11_profiling"
    sub = _submission(tmp_path, aid, "s11_hta_wrapper", "reference")
    files = ["tests/test_timeline.py", "tests/test_gaps.py"]
    allowed = grade_assignment(course=_Relaxed(COURSE.root, keep_accounting=True, keep_forbidden=False), assignment_id=aid, submission=sub,
                               sandbox="auto", hardware="cpu", only_files=files)
    assert allowed.score == allowed.max_score, [t.reason for t in allowed.tests if t.graded and not t.score]
    result, graded = _grade(sub, aid, accounting=True, only_files=files)
    refused = [t for t in graded if "idle_and_compute" in t.test.nodeid]
    assert len(refused) == 1 and refused[0].score == 0 and "forbidden" in refused[0].reason, refused[0].reason[:300]
    assert all(t.score == t.test.points for t in graded if t not in refused), [(t.test.nodeid, t.reason[:300]) for t in graded if t not in refused and t.score < t.test.points]


def test_sampling_from_the_target_alone_earns_nothing_for_the_loop(tmp_path):
    """Over the reference: speculative_generate samples from the target alone (stage 1's `generate`)
    and reports one token per made-up round. Its tokens are the target's, greedy and sampled alike,
    which is what a test of the output alone would accept; every test of the loop also checks the
    rounds or replays the algorithm's draws, and earns nothing. measure_acceptance keeps its points."""
    aid = "p7_specdec"
    sub = _submission(tmp_path, aid, "p7_target_alone", "reference")
    result, graded = _grade(sub, aid, accounting=True, only_files=["tests/test_decode.py"])
    loop = [t for t in graded if "acceptance" not in t.test.nodeid]
    assert len(loop) == 8 and all(t.score == 0 for t in loop), [(t.test.nodeid, t.score) for t in loop if t.score]
    kept = [t for t in graded if t not in loop]
    assert kept and all(t.score == t.test.points for t in kept)


def test_an_ep_layer_by_all_gather_earns_nothing_for_the_ep_tests(tmp_path):
    """Over the reference: ep_moe_forward all-gathers every token and all-reduces the experts'
    contributions instead of dispatch and combine. Its answers are right; the EP and DP tests lose
    their points to the forbidden collectives, dispatch's own test keeps its points."""
    aid = "p4_moe"
    sub = _submission(tmp_path, aid, "p4_allgather_ep", "reference")
    files = ["tests/test_ep_layer.py", "hidden/test_ranks_hidden.py", "tests/test_dispatch.py"]
    free = grade_assignment(course=_Relaxed(COURSE.root, keep_forbidden=False), assignment_id=aid, submission=sub, sandbox="auto",
                            hardware="cpu", only_files=files)
    assert free.score == free.max_score, [t.reason for t in free.tests if t.graded and not t.score]
    result, graded = _grade(sub, aid, accounting=True, only_files=files)
    ep = [t for t in graded if "dispatch" not in t.test.nodeid]
    assert ep and all(t.score == 0 for t in ep), [(t.test.nodeid, t.score) for t in ep]
    public = [t for t in ep if t.test.file.startswith("tests/")]
    assert public and all("all_gather is forbidden" in t.reason for t in public), public[0].reason
    kept = [t for t in graded if "dispatch" in t.test.nodeid]
    assert kept and all(t.score == t.test.points for t in kept)
