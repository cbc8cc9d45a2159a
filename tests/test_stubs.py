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
