import hashlib
import hmac
import json

from autograder.host.collect import read_reported, reconcile
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
