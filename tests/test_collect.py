import hashlib
import hmac
import json
import shutil
from pathlib import Path

from autograder.host.collect import read_reported, reconcile
from autograder.host.grade import grade_assignment
from autograder.host.results import ExpectedTest
from autograder.sandbox import RunResult

KEY = b"k" * 32
A = ExpectedTest("tests/test_a.py::test_one", "tests/test_a.py", 2.0, False, False)
B = ExpectedTest("tests/test_a.py::test_two", "tests/test_a.py", 1.0, False, False)


def _line(record, key=KEY):
    body = json.dumps(record, sort_keys=True)
    return json.dumps({"body": body, "mac": hmac.new(key, body.encode(), hashlib.sha256).hexdigest()})


def _write(tmp_path, *lines):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _ok(nodeid, status="passed"):
    return {"kind": "test", "nodeid": nodeid, "status": status, "reason": "", "output": "", "metrics": {}}


def test_signed_results_are_taken_and_a_missing_test_fails(tmp_path):
    path = _write(tmp_path, _line(_ok(A.nodeid)), _line({"kind": "session_end"}))
    results = reconcile([A, B], read_reported(path, KEY), RunResult(0, False, 1.0))
    assert [r.status for r in results] == ["passed", "failed"]
    assert "no result was reported" in results[1].reason


def test_a_forged_line_fails_every_test_of_the_file(tmp_path):
    path = _write(tmp_path, _line(_ok(A.nodeid)), _line(_ok(B.nodeid), key=b"guess"))
    results = reconcile([A, B], read_reported(path, KEY), RunResult(0, False, 1.0))
    assert all(r.status == "failed" and "tampered" in r.reason for r in results)


def test_duplicate_and_malformed_results_fail(tmp_path):
    bad = dict(_ok(B.nodeid), status="super-passed")
    path = _write(tmp_path, _line(_ok(A.nodeid)), _line(_ok(A.nodeid)), _line(bad))
    results = reconcile([A, B], read_reported(path, KEY), RunResult(0, False, 1.0))
    assert "2 results were reported" in results[0].reason
    assert "malformed" in results[1].reason


def test_a_crashed_process_names_the_signal(tmp_path):
    results = reconcile([A], read_reported(tmp_path / "none.jsonl", KEY), RunResult(-11, False, 1.0))
    assert "SIGSEGV" in results[0].reason


def test_a_timed_out_process_says_so(tmp_path):
    results = reconcile([A], read_reported(tmp_path / "none.jsonl", KEY), RunResult(-9, True, 30.0))
    assert "wall limit (30 s)" in results[0].reason


def test_a_checkout_without_solutions_collects_over_its_own_stub_never_the_submission(demo_course, tmp_path):
    """The collection run is not sandboxed: a submission graded by a checkout that has no reference
    (a GPU runner, a TA's clone) must not be imported there. Its package notes each import's folder."""
    shutil.rmtree(demo_course.solutions)
    submission = tmp_path / "submission"
    shutil.copytree(demo_course.student_dir("s00_demo"), submission)
    marker = tmp_path / "imports.txt"
    init = submission / "demo" / "__init__.py"
    init.write_text(f"import os\nwith open({str(marker)!r}, 'a') as f:\n    f.write(os.getcwd() + '\\n')\n"
                    + init.read_text())
    result = grade_assignment(course=demo_course, assignment_id="s00_demo", submission=submission)
    assert result.tests, result.notes  # graded: every test has a result
    imports = marker.read_text().splitlines() if marker.exists() else []
    assert not [cwd for cwd in imports if Path(cwd).name == "collect"], imports
