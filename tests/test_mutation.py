"""Mechanical mutation testing: region filtering, the seeded sample, verdicts kept across reruns.
Nothing here grades: the pure functions run everywhere, the cosmic-ray enumeration only where it is installed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.authoring.mutation import (
    Candidate,
    Survivor,
    _outcome,
    in_regions,
    load_survivors,
    merge_verdicts,
    mutated_text,
    region_lines,
    render,
    sample,
)

MODULE = '''\
def scale(x, y):
    """Doc."""
    z = x + 1
    # BEGIN SOLUTION
    if x > y:
        return x * 2 - y
    return y
    # END SOLUTION


def outside(a):
    return a - 3
'''

DIFF = """\
--- a/pkg/m.py
+++ b/pkg/m.py
@@ -5,3 +5,3 @@
     if x > y:
-        return x * 2 - y
+        return x * 3 - y
     return y
"""


def _candidates(files: int, families: tuple[str, ...], per_family: int) -> list[Candidate]:
    return [Candidate(f"pkg/f{f}.py", 10 + i, 10 + i, f"core/{fam}_{i}", i)
            for f in range(files) for fam in families for i in range(per_family)]


def test_region_lines_are_the_lines_between_the_markers():
    assert region_lines(MODULE, "m.py") == {5, 6, 7}
    two = MODULE + "\n\ndef more(b):\n    # BEGIN SOLUTION\n    return b\n    # END SOLUTION\n"
    assert region_lines(two, "m.py") == {5, 6, 7, 17}


def test_a_mutation_counts_only_when_all_its_lines_are_inside_a_region():
    lines = {5, 6, 7}
    assert in_regions(Candidate("m.py", 6, 6, "core/NumberReplacer", 0), lines)
    assert in_regions(Candidate("m.py", 5, 7, "core/ZeroIterationForLoop", 0), lines)
    assert not in_regions(Candidate("m.py", 3, 3, "core/NumberReplacer", 0), lines)
    assert not in_regions(Candidate("m.py", 7, 8, "core/AddNot", 0), lines)


def test_the_sample_is_deterministic_and_independent_of_input_order():
    pool = _candidates(3, ("ReplaceBinaryOperator", "NumberReplacer", "AddNot"), 5)
    first = sample(pool, 10, seed=0)
    assert len(first) == 10 and len(set(first)) == 10
    assert sample(list(reversed(pool)), 10, seed=0) == first
    assert sample(pool, 10, seed=1) != first
    everything = sample(pool, 1000, seed=0)
    assert len(everything) == len(pool) and set(everything) == set(pool)


def test_the_sample_spreads_over_files_and_operator_families():
    pool = _candidates(2, ("ReplaceBinaryOperator", "NumberReplacer", "AddNot"), 20)
    chosen = sample(pool, 6, seed=3)
    for file in ("pkg/f0.py", "pkg/f1.py"):
        assert sorted(c.family for c in chosen if c.file == file) == ["AddNot", "NumberReplacer",
                                                                      "ReplaceBinaryOperator"]


def test_the_mutated_text_ignores_line_numbers_and_indentation():
    moved = DIFF.replace("@@ -5,3 +5,3 @@", "@@ -40,3 +40,3 @@").replace("+        return", "+    return")
    assert mutated_text(DIFF) == mutated_text(moved) == "return x * 3 - y"
    assert mutated_text("--- a/m.py\n+++ b/m.py\n@@ -1 +0,0 @@\n-    break\n") == "-break"


def test_outcomes_of_a_grading():
    normal = SimpleNamespace(worker_outcome="normal", output="")
    assert _outcome({"score": 5, "max_score": 5, "lost": []}, normal) == "survived"
    assert _outcome({"score": 3, "max_score": 5, "lost": ["t.py::a"]}, normal).startswith("killed (3/5, t.py::a")
    assert _outcome({"timed_out": True}, normal) == "killed (timeout)"
    assert _outcome({}, SimpleNamespace(worker_outcome="normal", output="grading failed")).startswith("error")
    assert _outcome({}, SimpleNamespace(worker_outcome="exception", output="Traceback")).startswith("error")


def test_a_rerun_keeps_verdicts_matched_by_file_operator_and_mutated_text():
    reviewed = Survivor("pkg/m.py", 6, "core/NumberReplacer", DIFF, "equivalent: scale of 2 or 3 is not observed")
    killed_now = Survivor("pkg/m.py", 9, "core/AddNot", DIFF.replace("x * 3", "not x * 2"), "caught by test_x")
    not_graded = Survivor("pkg/n.py", 2, "core/AddNot", DIFF, "caught by test_y")
    unreviewed = Survivor("pkg/o.py", 2, "core/AddNot", DIFF)
    moved = Survivor("pkg/m.py", 41, "core/NumberReplacer", DIFF.replace("-5,3 +5,3", "-40,3 +40,3"))
    merged = merge_verdicts([reviewed, killed_now, not_graded, unreviewed], [moved],
                            graded={moved.key, killed_now.key})
    assert merged == [Survivor("pkg/m.py", 41, "core/NumberReplacer", moved.diff, reviewed.verdict), not_graded]
    other_operator = Survivor("pkg/m.py", 6, "core/ReplaceBinaryOperator_Mul_Add", DIFF)
    rerun = merge_verdicts([reviewed], [other_operator], graded={other_operator.key, reviewed.key})
    assert rerun == [other_operator]  # another operator on the same line is another mutation


def test_the_report_round_trips_through_toml(tmp_path: Path):
    tricky = DIFF.replace("return y", "return '''\\n\" \\t'''")  # falls back to a basic string
    survivors = [Survivor("pkg/m.py", 6, "core/NumberReplacer", DIFF, 'equivalent: "2" vs \\ 3'),
                 Survivor("pkg/m.py", 7, "core/AddNot", tricky),
                 Survivor("pkg/m.py", 8, "core/AddNot", "+ no newline at the end\x7f")]
    summary = {"assignment": "s99_demo", "max": 30, "graded": 30, "killed": 27, "kill_rate": 0.9}
    path = tmp_path / "mutation.toml"
    path.write_text(render(summary, survivors))
    assert tomllib.loads(path.read_text())["summary"] == summary
    assert load_survivors(path) == survivors
    assert "diff = '''\n--- a/pkg/m.py" in path.read_text()  # the plain diff stays readable


def test_cosmic_ray_mutations_are_enumerated_and_filtered_to_the_regions(tmp_path: Path):
    pytest.importorskip("cosmic_ray")
    from cosmic_ray.work_db import use_db

    from autograder.authoring.mutation import _mutations

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(MODULE)
    (tmp_path / "pkg" / "plain.py").write_text("def f(a):\n    return a + 1\n")  # no region: not enumerated
    with use_db(tmp_path / "session.sqlite") as db:
        items = _mutations(tmp_path, "pkg", db)
    assert {c.file for c in items} == {"pkg/m.py"}
    inside = {c for c, (_, inner) in items.items() if inner}
    assert {c.line for c in inside} == {5, 6}
    assert {c.line for c in items if c not in inside} == {3, 12}
    assert {c.family for c in inside} >= {"ReplaceComparisonOperator", "ReplaceBinaryOperator", "NumberReplacer"}
