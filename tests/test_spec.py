import pytest

from autograder.errors import GraderError
from autograder.host.results import PASSED, ExpectedTest, TestResult
from autograder.host.score import score_all
from autograder.host.spec import Threshold, load_spec, parse_spec

VALID = {
    "assignment": {"id": "s01_transformer", "title": "t", "stage": 1, "package": "transformer",
                   "editable": ["transformer/*.py"]},
    "limits": {"test_timeout_s": 10, "file_timeout_s": 60, "memory_mb": 1024, "forbidden": ["a.b"]},
    "perf": {"speedup": {"unit": "x", "better": "higher", "thresholds": {"h200": {"pass": 2, "full": 4, "env": "gpu-image-1"}}}},
}


def _with(**changes):
    data = {k: dict(v) for k, v in VALID.items()}
    for dotted, value in changes.items():
        table, key = dotted.split("__")
        data[table][key] = value
    return data


def test_valid_spec_parses_into_typed_fields():
    spec = parse_spec(VALID)
    assert spec.task_prefix == "s01"
    assert spec.limits.forbidden == ("a.b",)
    assert spec.perf["speedup"].thresholds["h200"] == Threshold(2.0, 4.0, "gpu-image-1")


@pytest.mark.parametrize("changes, message", [
    ({"assignment__id": "transformer"}, "sNN_topic"),
    ({"assignment__stage": 16}, "between 0 and 15"),
    ({"assignment__package": "my-pkg"}, "not a valid Python package"),
    ({"assignment__editable": []}, "at least one glob"),
    ({"assignment__editable": ["../etc/*"]}, "inside the assignment"),
    ({"limits__memory_mb": 10}, "below 256"),
    ({"limits__file_timeout_s": 1}, "at least test_timeout_s"),
    ({"limits__walltime": 1}, r"\[limits\]: unknown key .walltime."),
])
def test_invalid_spec_names_the_problem(changes, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(_with(**changes))


@pytest.mark.parametrize("entry, message", [
    ({"rtol": 1e-5}, "'atol' is a required property"),
    ({"rtol": 1e-5, "atol": 1e-6, "tolerance": 1}, "unknown key 'tolerance'"),
    ({"rtol": "1e-5", "atol": 1e-6}, "is not of type 'number'"),
    ({"rtol": -1e-5, "atol": 1e-6}, "finite number >= 0"),
    ({"rtol": 1e-5, "atol": float("inf")}, "finite number >= 0"),
])
def test_a_malformed_tolerance_is_rejected_with_its_name(entry, message):
    data = _with()
    data["tolerances"] = {"softmax, fp32": entry}
    with pytest.raises(ValueError, match=message) as err:
        parse_spec(data)
    assert "softmax, fp32" in str(err.value)


def test_tolerances_parse_into_assert_close_arguments(tmp_path):
    from autograder.testing import tolerances

    (tmp_path / "assignment.toml").write_text(
        '[tolerances]\n"residual sum" = { rtol = 0, atol = 0, note = "exact" }\n'
        '"softmax, fp32" = { rtol = 1e-5, atol = 1e-6 }\n')
    tol = tolerances(tmp_path)
    assert tol("softmax, fp32") == {"rtol": 1e-5, "atol": 1e-6}
    assert tol("residual sum") == {"rtol": 0.0, "atol": 0.0}
    with pytest.raises(KeyError, match="known: \\['residual sum', 'softmax, fp32'\\]"):
        tol("softmax, fp64")


def test_threshold_easier_full_bar_is_rejected():
    data = _with()
    data["perf"] = {"m": {"better": "higher", "thresholds": {"cpu": {"pass": 4, "full": 2, "env": "student-cpu"}}}}
    with pytest.raises(ValueError, match="easier than the pass bar"):
        parse_spec(data)


@pytest.mark.parametrize("value, higher, expected", [
    (0.9, True, 0.0), (1.0, True, 0.5), (1.5, True, 0.75), (3.0, True, 1.0), (float("nan"), True, 0.0),
    (3.0, False, 0.0), (2.0, False, 0.5), (1.5, False, 0.75), (0.5, False, 1.0),
])
def test_threshold_credit_is_half_at_pass_and_linear_to_full(value, higher, expected):
    bar = Threshold(1.0, 2.0) if higher else Threshold(2.0, 1.0)
    assert bar.fraction(value, higher) == pytest.approx(expected, abs=1e-12)


def test_malformed_toml_gives_file_and_reason(tmp_path):
    folder = tmp_path / "s01_x"
    folder.mkdir()
    (folder / "assignment.toml").write_text("[assignment\nid=")
    with pytest.raises(GraderError, match="malformed TOML"):
        load_spec(folder / "assignment.toml")


def test_id_must_match_folder(tmp_path):
    folder = tmp_path / "s02_other"
    folder.mkdir()
    (folder / "assignment.toml").write_text(
        '[assignment]\nid="s01_transformer"\ntitle="t"\nstage=1\npackage="t"\neditable=["t/*.py"]\n')
    with pytest.raises(GraderError, match="differs from its folder"):
        load_spec(folder / "assignment.toml")


@pytest.mark.parametrize("unit, shown", [("x", "3x: pass"), ("fraction", "3 fraction: pass")])
def test_perf_note_gives_value_unit_bars_and_credit(unit, shown):
    data = _with()
    data["perf"] = {"speedup": {"unit": unit, "better": "higher", "thresholds": {"h200": {"pass": 2, "full": 4, "env": "gpu-image-1"}}}}
    test = ExpectedTest(nodeid="t.py::test_speed", file="t.py", points=4, gpu=True, perf=True)
    result = TestResult(test=test, status=PASSED, metrics={"speedup": 3.0})
    score_all([result], parse_spec(data), "h200")
    assert result.score == pytest.approx(4 * 0.75)  # 0.5 at pass, linear to 1 at full: 3 is halfway
    assert result.perf_notes == [f"speedup = {shown} >= 2, full >= 4 on h200 (measured in gpu-image-1) -> 75%"]


def test_a_tolerance_no_test_uses_is_reported(demo_course):
    from autograder.authoring.invariants import check_handout

    spec = demo_course.solutions / "s00_demo" / "assignment.toml"
    spec.write_text(spec.read_text() + '\n[tolerances]\n"sum, fp32" = { rtol = 1e-6, atol = 0 }\n')
    assert any("'sum, fp32' is printed in the handout but no test uses it" in f for f in check_handout(demo_course, "s00_demo"))
    test = demo_course.solutions / "s00_demo" / "tests" / "test_uses_tol.py"
    test.write_text('def test_x():\n    assert "sum, fp32"\n')
    assert not any("no test uses it" in f for f in check_handout(demo_course, "s00_demo"))


HEAD = '[assignment]\nid = "s00_x"\ntitle = "t"\nstage = 0\npackage = "x"\neditable = ["x/*.py"]\n'


@pytest.mark.parametrize(("toml", "message"), [
    ('[assignment]\nid = "s00_x"\ntitle = "t"\nstage = 0\npackage = "x"\neditabel = ["x/*.py"]\n',
     r"\[assignment\]: unknown key 'editabel'; did you mean 'editable'\?"),
    (HEAD + '[limit]\ntest_timeout_s = 5\n', r"unknown table 'limit'; did you mean 'limits'\?"),
    (HEAD + '[perf.speed]\nbeter = "lower"\n', r"\[perf.speed\]: unknown key 'beter'; did you mean 'better'\?"),
    (HEAD + '[perf.speed.thresholds]\nh2000 = { pass = 1, full = 2, env = "gpu-image-1" }\n',
     r"no hardware is tagged 'h2000'; did you mean 'h200'\?"),
    (HEAD + '[tolerances]\n"x" = { rtol = 0, atoll = 0 }\n', r"unknown key 'atoll'; did you mean 'atol'\?"),
    (HEAD + '[[given]]\npackge = "y"\nsolves = "s00_y"\n', r"\[\[given\]\] #1: unknown key 'packge'; did you mean 'package'\?"),
    (HEAD + '[limits]\nmemory_mb = "4096"\n', r"\[limits.memory_mb\]: '4096' is not of type 'integer'"),
])
def test_a_typo_in_assignment_toml_is_an_error_naming_the_file_and_the_nearest_key(tmp_path, toml, message):
    """A misspelt key would otherwise drop silently: limits ignored, a metric graded the wrong way, a bar
    on a tag no machine has (never graded). The error names the file, the table and the valid name."""
    pytest.importorskip("jsonschema", reason="assignment.toml's keys are checked with jsonschema (make setup)")
    folder = tmp_path / "s00_x"
    folder.mkdir()
    (folder / "assignment.toml").write_text(toml)
    with pytest.raises(GraderError, match=message) as caught:
        load_spec(folder / "assignment.toml")
    assert str(folder / "assignment.toml") in str(caught.value)


def _perf_result(bars: dict, hardware: str) -> TestResult:
    data = _with()
    data["perf"] = {"speedup": {"unit": "x", "better": "higher", "thresholds": bars}}
    test = ExpectedTest(nodeid="t.py::test_speed", file="t.py", points=4, gpu=True, perf=True)
    result = TestResult(test=test, status=PASSED, metrics={"speedup": 3.0})
    score_all([result], parse_spec(data), hardware)
    return result


def test_a_runner_without_its_own_bar_grades_on_its_familys_marked_provisional():
    result = _perf_result({"h200": {"pass": 2, "full": 4, "env": "gpu-image-1"}}, "h100")
    assert result.status == PASSED and result.score == pytest.approx(3.0)
    assert result.perf_notes == [("speedup = 3x: pass >= 2, full >= 4 on h100, provisional: the bar measured on "
                                 "h200 (same hopper family) until `calibrate --write` on h100 (measured in gpu-image-1) -> 75%")]


def test_a_runners_own_bar_wins_over_its_familys():
    result = _perf_result({"h200": {"pass": 2, "full": 4, "env": "gpu-image-1"}, "h100": {"pass": 1, "full": 3, "env": "gpu-image-1"}}, "h100")
    assert result.score == pytest.approx(4.0) and "provisional" not in result.perf_notes[0]


@pytest.mark.parametrize("hardware", ["a100", "cpu", "gpu-some-new-card"])
def test_another_generations_bar_is_never_used(hardware):
    result = _perf_result({"h200": {"pass": 2, "full": 4, "env": "gpu-image-1"}}, hardware)
    assert result.status == "not_graded" and result.score == 0
    assert result.perf_notes == [f"speedup = 3 (no bar for {hardware})"]
