from autograder.authoring import stubs


def test_generated_release_strips_bodies_and_omits_hidden(demo_course):
    files = stubs.render_release(demo_course.solutions / "s00_demo", "s00")
    names = {str(p) for p in files}
    assert "hidden/test_ops_hidden.py" not in names
    assert {"assignment.toml", "README.md", "demo/ops.py", "tests/test_ops.py"} <= names
    ops = files[__import__("pathlib").Path("demo/ops.py")].decode()
    assert 'raise NotImplementedError("s00.1: add")' in ops and "return a + b" not in ops


def test_stale_assignment_is_detected_and_regeneration_fixes_it(demo_course):
    assert stubs.stale_paths(demo_course, "s00_demo") == []
    target = demo_course.assignments / "s00_demo" / "demo" / "ops.py"
    target.write_text(target.read_text() + "\n# edited\n")
    (demo_course.assignments / "s00_demo" / "extra.txt").write_text("x")
    assert stubs.stale_paths(demo_course, "s00_demo") == ["extra extra.txt", "differs demo/ops.py"]
    stubs.write_all(demo_course)
    assert stubs.stale_paths(demo_course, "s00_demo") == []


def test_leak_check_finds_markers_and_hidden_tests(demo_course):
    release = demo_course.assignments / "s00_demo"
    assert stubs.leaked_solutions(release) == []
    (release / "hidden").mkdir()
    (release / "hidden" / "test_x.py").write_text("")
    (release / "demo" / "leak.py").write_text("def f():\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION\n")
    assert stubs.leaked_solutions(release) == ["demo/leak.py: contains solution markers",
                                               "hidden: instructor-only file", "hidden/test_x.py: instructor-only file"]


def test_a_changed_bar_or_test_changes_the_handouts_grading_section():
    """The section is a function of the spec and the collected tests: moving a bar or adding a
    test point changes it, and regenerating replaces the old section in place."""
    from dataclasses import replace

    from autograder.authoring.handout import BEGIN, END, grading_section, with_section
    from autograder.host.results import ExpectedTest
    from autograder.host.spec import parse_spec

    head = {"assignment": {"id": "s09_x", "title": "t", "stage": 9, "package": "x", "editable": ["x/*.py"]}}
    perf = {"perf": {"ratio": {"description": "d", "unit": "x", "better": "higher",
                               "thresholds": {"h200": {"pass": 0.8, "full": 1.2, "env": "gpu-image-1"}}}}}
    spec = parse_spec({**head, **perf})
    tests = [ExpectedTest("tests/test_a.py::t", "tests/test_a.py", 2.0, False, False),
             ExpectedTest("hidden/test_p.py::p", "hidden/test_p.py", 3.0, True, True)]
    section = grading_section(spec, tests)
    assert "| **total** | 2 | 5 |" in section and "| `ratio` | d | higher | h200 | 0.8x | 1.2x |" in section
    moved = parse_spec({**head, "perf": {"ratio": {**perf["perf"]["ratio"], "thresholds": {"h200": {"pass": 0.9, "full": 1.2, "env": "gpu-image-1"}}}}})
    assert grading_section(moved, tests) != section
    assert grading_section(spec, [*tests[:1], replace(tests[1], points=4.0)]) != section
    readme = with_section("# Handout\n\ntext\n", section)
    again = with_section(readme.replace("0.8x", "0.7x"), section)
    assert again == readme and again.count(BEGIN) == again.count(END) == 1
    unset = parse_spec({**head, "perf": {"ratio": {**perf["perf"]["ratio"], "thresholds": {}}}})
    assert "| `ratio` | d | higher | none yet | - | - |" in grading_section(unset, tests)  # no empty table
