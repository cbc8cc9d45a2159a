"""Test design: submissions that earn points only where a test asks too little.

- design_raises: s03's package with every public name raising ValueError. A validation-only test
  (`pytest.raises(ValueError)` and nothing else) would credit it; each such test now also requires
  the valid case beside the refused one. Graded on s03's cost-model file (CPU, no ranks).
- design_rtn: P3's reference with GPTQ.quantize replaced by plain round-to-nearest (H ignored). The
  quality gates keep a margin measured between RTN and GPTQ (see the tests' comments), so RTN
  earns none of them. Graded on the two files that hold the gates only."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES, REPO

from autograder.host.grade import grade_assignment
from autograder.host.repo import Course

ATTACKS = FIXTURES / "tampering"
GATES = ("test_gptq_cuts_rtns_output_error_by_30_percent_on_correlated_inputs",
         "test_gptq_cuts_every_linears_output_error_against_rtn",
         "test_w4_g128_gptq_perplexity_within_3_percent_of_fp", "test_3_bit_gptq_perplexity_beats_rtn")


def _by_name(result) -> dict:
    return {t.test.nodeid.split("::")[1].split("[")[0]: t for t in result.tests}


def test_a_package_that_refuses_every_input_earns_nothing(repo_course: Course):
    result = grade_assignment(course=repo_course, assignment_id="s03_collectives",
                              submission=ATTACKS / "design_raises", only_files=["tests/test_cost_model.py"])
    earned = [(t.test.nodeid, t.status) for t in result.tests if t.status == "passed"]
    assert result.score == 0 and not earned, earned


def test_rtn_in_place_of_gptq_clears_none_of_the_quality_gates(repo_course: Course, tmp_path: Path):
    sub = tmp_path / "submission"
    shutil.copytree(REPO / "solutions" / "p3_gptq" / "gptq", sub / "gptq")
    shutil.copy(ATTACKS / "design_rtn" / "gptq" / "gptq.py", sub / "gptq" / "gptq.py")
    result = grade_assignment(course=repo_course, assignment_id="p3_gptq", submission=sub,
                              only_files=["tests/test_gptq.py", "hidden/test_course_model_hidden.py"])
    tests = _by_name(result)
    assert tests[GATES[0]].status == "failed", tests[GATES[0]].reason
    for gate in GATES[1:]:  # graded where the course model is built, else not graded: never passed
        assert tests[gate].status != "passed", (gate, tests[gate].output[-800:])
