import json

from autograder.host import report, result_files
from autograder.host.results import AssignmentResult, ExpectedTest, TestResult

GRADESCOPE_TOP = {"score", "execution_time", "output", "visibility", "stdout_visibility", "tests", "leaderboard"}
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "number", "output", "tags", "visibility", "extra_data"}


def _result(statuses, hidden_available=True):
    r = AssignmentResult("s00_demo", "Demo", "cpu", "none", "student", hidden_available=hidden_available)
    for i, status in enumerate(statuses):
        test = ExpectedTest(f"tests/test_a.py::t{i}", "tests/test_a.py", 1.0, status == "not_graded", False)
        r.tests.append(TestResult(test, status, score=1.0 if status == "passed" else 0.0))
    return r


def test_gradescope_file_has_the_documented_schema(tmp_path):
    path = tmp_path / "results.json"
    result_files.write_json(path, [_result(["passed", "failed", "not_graded"])])
    data = json.loads(path.read_text())
    assert set(data) == GRADESCOPE_TOP
    assert all(set(t) == GRADESCOPE_TEST for t in data["tests"])
    assert data["score"] == 1.0 and [t["max_score"] for t in data["tests"]] == [1.0, 1.0, 0.0]


def test_results_file_is_written_even_when_grading_crashed(tmp_path):
    path = tmp_path / "results.json"
    result_files.write_json(path, [], error="could not collect the master tests")
    data = json.loads(path.read_text())
    assert data["score"] == 0 and data["tests"] == [] and "grading failed" in data["output"]


def test_summary_claims_all_passed_only_when_everything_ran():
    assert "all tests passed" in report.summary_line(_result(["passed", "passed"]))
    partial = report.summary_line(_result(["passed", "not_graded"]))
    assert "all tests passed" not in partial and "1 test not graded here" in partial
    public_only = report.summary_line(_result(["passed"], hidden_available=False))
    assert "all tests passed" not in public_only and "hidden tests not run" in public_only


def test_junit_and_markdown_name_failures(tmp_path):
    r = _result(["passed", "failed"])
    r.tests[1].reason = "assert 1 == 2"
    result_files.write_junit(tmp_path / "j.xml", [r])
    assert '<failure message="assert 1 == 2"' in (tmp_path / "j.xml").read_text()
    assert "assert 1 == 2" in result_files.markdown([r])


def test_terminal_table_folds_passing_files_and_names_the_error_of_failures():
    from rich.console import Console

    r = _result(["passed", "passed", "failed"])
    r.tests[2].test.file = "tests/test_b.py"
    r.tests[2].test.nodeid = "tests/test_b.py::t2"
    r.tests[2].output = "    assert x\nE   NotImplementedError: s00.1: add\n"
    console = Console(width=160, record=True)
    report.print_result(r, console)
    text = console.export_text()
    assert "tests/test_a.py (2 tests)" in text and "t0" not in text  # folded into one row
    assert "NotImplementedError: s00.1: add" in text


def _printed(r) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    report.print_result(r, console)
    return console.export_text()


def test_terminal_table_shows_the_parameters_of_parametrized_tests():
    r = _result(["failed", "failed"])
    for test, ids in zip(r.tests, ["q4-kv1", "heads0-True"], strict=True):
        test.test.nodeid = f"tests/test_a.py::test_grouped_query_heads[{ids}]"
    text = _printed(r)
    assert "test_grouped_query_heads[q4-kv1]" in text and "test_grouped_query_heads[heads0-True]" in text


def test_markup_in_student_text_is_printed_literally():
    r = _result(["failed"])
    r.tests[0].reason = "odd [/] and [bold] text"
    r.notes.append("a note with [/red] in it")
    text = _printed(r)
    assert "odd [/] and [bold] text" in text and "a note with [/red] in it" in text


def test_public_files_print_before_hidden_ones():
    r = _result(["failed", "failed"])
    hidden = r.tests[0].test
    hidden.file, hidden.nodeid = "hidden/test_a_hidden.py", "hidden/test_a_hidden.py::t0"  # hidden: by its folder
    text = _printed(r)  # the hidden file comes first in the results, as sorted file names put it
    assert text.index("tests/test_a.py") < text.index("hidden/test_a_hidden.py")


def test_tests_failing_for_the_same_reason_fold_into_one_row_with_a_count():
    r = _result(["failed"] * 5 + ["failed"])
    for t in r.tests[:5]:
        t.reason = "NotImplementedError: s00.1: add"
    r.tests[5].reason = "AssertionError: 3 != 4"
    text = _printed(r)
    assert text.count("s00.1: add") == 1 and "4 more failing the same way" in text
    assert "3 != 4" in text  # another reason keeps its own row


def test_at_80_columns_each_test_id_and_reason_reads_whole_on_its_own_lines():
    """A six-column table at 80 columns folds ids into 15-character slivers; the list layout keeps
    each id on one line and its reason on the lines below (markup still printed literally)."""
    from rich.console import Console

    r = _result(["failed", "failed"])
    long_id = "test_fused_add_rmsnorm_full_size_gpu[bf16-0.01]"
    r.tests[0].test.nodeid = f"tests/test_a.py::{long_id}"
    r.tests[0].reason = "NotImplementedError: s04.3: fused_add_rmsnorm [/] in your code: tritonkernels/rmsnorm.py:48"
    console = Console(width=80, record=True)
    report.print_result(r, console)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    [row] = [line for line in lines if long_id in line]  # whole, on one line
    assert "failed" in row and "0/1" in row
    reason = " ".join(line.strip() for line in lines[lines.index(row) + 1:])
    assert "s04.3: fused_add_rmsnorm [/] in your code: tritonkernels/rmsnorm.py:48" in reason
    assert "┃" not in console.export_text()  # no table at this width


def test_a_wide_terminal_gets_the_table():
    from rich.console import Console

    console = Console(width=report.TABLE_MIN_WIDTH, record=True)
    report.print_result(_result(["failed"]), console)
    assert "perf / reason" in console.export_text()


def test_the_header_says_whose_code_and_which_suites_were_graded():
    def title(r) -> str:  # the title wraps over lines as wide as the table
        return " ".join(_printed(r).split())

    assert "assignments/ folder, public and hidden tests]" in title(_result(["passed"]))
    assert "assignments/ folder, public tests only]" in title(_result(["passed"], hidden_available=False))


def test_a_folded_row_of_passing_tests_says_how_to_name_them():
    r = _result(["passed", "passed", "failed"])
    assert "… 2 more passed (V=1 names them)" in _printed(r)
    verbose = _printed_verbose(r)
    assert "more passed" not in verbose and "  t0 " in verbose and "  t1 " in verbose, verbose


def _printed_verbose(r) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    report.print_result(r, console, verbose=True)
    return console.export_text()


def test_a_long_reason_is_cut_at_a_word_not_mid_word():
    r = _result(["failed"])
    r.tests[0].reason = "AssertionError: " + " ".join(f"word{i:03d}" for i in range(60))
    detail = report._detail(r.tests[0])
    assert len(detail) <= report.DETAIL_CHARS and detail.endswith(" ...")
    assert all(w.startswith("word") and len(w) == 7 for w in detail.removesuffix(" ...").split()[1:]), detail


def test_a_long_test_id_reads_whole_on_one_line_in_the_table_and_in_the_list():
    """A test id is what `-k` takes: it never wraps inside the table; where it cannot fit beside a
    reason, the list layout prints it on a line of its own."""
    from rich.console import Console

    r = _result(["failed"])
    name = "test_one_byte_short_of_the_weights_is_refused_and_exactly_the_weights_hold_no_token"
    r.tests[0].test.nodeid = f"tests/test_a.py::{name}"
    r.tests[0].reason = "AssertionError: " + "a long reason " * 20
    for width in (200, 100):
        console = Console(width=width, record=True)
        report.print_result(r, console)
        assert any(name in line for line in console.export_text().splitlines()), (width, console.export_text())


def test_verbose_names_every_test_failing_the_same_way():
    r = _result(["failed", "failed", "failed"])
    for t in r.tests:
        t.reason = "NotImplementedError: s00.1: add"
    assert "2 more failing the same way (V=1 names them)" in _printed(r)
    verbose = _printed_verbose(r)
    assert "more failing" not in verbose and all(f"  t{i} " in verbose for i in range(3)), verbose
