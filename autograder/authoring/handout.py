"""The grading section of each handout, generated from assignment.toml and the collected tests so
that a handout can never disagree with how it is graded: points per part, the perf credit rule,
and every perf bar by hardware. `autograder handouts` writes it into solutions/<id>/README.md
between two markers; the course invariants fail when a committed handout differs."""

from __future__ import annotations

from pathlib import Path

from autograder.authoring.task_record import TaskEntry, TaskRecord, read_record
from autograder.host.grade import expected_tests
from autograder.host.repo import Course
from autograder.host.results import ExpectedTest
from autograder.host.spec import AssignmentSpec

BEGIN = "<!-- grading: generated from assignment.toml and the tests by `python -m autograder handouts`; do not edit -->"
END = "<!-- end of the generated grading section -->"
TASKS_BEGIN = "<!-- tasks: generated from tasks.toml by `python -m autograder handouts`; do not edit -->"
TASKS_END = "<!-- end of the generated tasks section -->"


def _row(label: str, tests: list[ExpectedTest]) -> str:
    return f"| {label} | {len(tests)} | {sum(t.points for t in tests):g} |"


def grading_section(spec: AssignmentSpec, tests: list[ExpectedTest]) -> str:
    """The Markdown between BEGIN and END (both included)."""
    public = [t for t in tests if t.file.startswith("tests/")]
    hidden = [t for t in tests if not t.file.startswith("tests/")]
    gpu, perf = [t for t in tests if t.gpu], [t for t in tests if t.perf]
    cpu = [t for t in tests if not t.gpu and not t.perf]
    lines = [BEGIN, "## Points and bars", "", "| tests | count | points |", "|---|---|---|",
             _row("public (`tests/`, shipped to you)", public), _row("hidden (graded only)", hidden),
             _row("of all these: gradable on a CPU-only machine", cpu),
             _row("of all these: need a CUDA GPU", gpu), _row("of all these: performance", perf),
             _row("**total**", tests), "",
             ("A test earns its points when it passes. A test that needs hardware this machine lacks is "
              "*not graded here*: neither earned nor counted in the total of that run."), "",
             (f"`make grade A={spec.id}` grades your folder and prints one line per failing test; "
              f"`make grade A={spec.id} V=1` also prints each failing test's output (the assertion with "
              "its numbers, your line that raised) and names every passing test.")]
    if spec.perf:
        lines += ["", ("A performance test earns a share of its points from each metric it records: 0 below "
                       "the pass bar, half at it, rising linearly to all of it at the full bar (the mean over "
                       "its metrics). Its output must also pass the test's correctness check. A GPU without a bar "
                       "of its own is graded on the bar of a GPU of the same generation (an H100 on the H200's), "
                       "marked provisional in the report; a metric with no bar for your hardware's generation "
                       "is not graded here: the test reports the number only."), "",
                  "| metric | what it measures | better | hardware | pass | full |", "|---|---|---|---|---|---|"]
        for name, metric in sorted(spec.perf.items()):
            better = "higher" if metric.higher_is_better else "lower"
            if not metric.thresholds:  # measured and reported, graded nowhere yet
                lines.append(f"| `{name}` | {metric.description} | {better} | none yet | - | - |")
            for tag, bar in sorted(metric.thresholds.items()):
                unit = metric.unit if metric.unit in ("x", "%") else f" {metric.unit}" if metric.unit else ""
                lines.append(f"| `{name}` | {metric.description} | {better} | {tag} | {bar.pass_bar:g}{unit} | "
                             f"{bar.full_bar:g}{unit} |")
    if spec.written:
        lines += ["", "### Written answers", "",
                  ("Write each answer in its file below the question. An instructor grades it against a rubric; "
                   "until then its points are *pending*: in the denominator of the total the grader prints, not yet "
                   "earned. An answer left empty earns 0 at once."), "",
                  "| file | points | question |", "|---|---|---|"]
        lines += [f"| `{w.answer}` | {w.points:g} | {w.question} |" for w in spec.written]
    if spec.tolerances:
        lines += ["", "### Numerical tolerances", "",
                  ("Each correctness test compares your output with its oracle by "
                   "`torch.testing.assert_close(actual, expected, rtol=..., atol=...)`, which passes when "
                   "|actual - expected| <= atol + rtol * |expected| elementwise, at one of these tolerances "
                   "(the tests read them from `assignment.toml`):"), "",
                  "| compared | rtol | atol | why |", "|---|---|---|---|"]
        for name, t in spec.tolerances.items():
            lines.append(f"| {name} | {t.rtol:g} | {t.atol:g} | {t.note} |")
    return "\n".join([*lines, END])


def with_section(readme: str, section: str, begin: str = BEGIN, end: str = END) -> str:
    """`readme` with its generated section (between `begin` and `end`) replaced by `section`, appended
    when it has none; an empty `section` removes it."""
    if begin in readme and end in readme:
        head, rest = readme.split(begin, 1)
        tail = rest.split(end, 1)[1]
        return head + section + tail if section else head.rstrip("\n") + "\n" + tail.lstrip("\n")
    return readme.rstrip("\n") + "\n\n" + section + "\n" if section else readme


def current_handout(course: Course, assignment_id: str) -> tuple[Path, str, str]:
    """(the handout's path, its text, its text with the generated sections regenerated)."""
    path = course.solution_dir(assignment_id) / "README.md"
    text = path.read_text()
    section = grading_section(course.spec(assignment_id), expected_tests(course, assignment_id))
    record = read_record(course, assignment_id)
    tasks = tasks_section(record) if record is not None else ""
    return path, text, with_section(with_section(text, section), tasks, TASKS_BEGIN, TASKS_END)


def _spans(ids: list[str]) -> str:
    """"s05.1–s05.3, s05.7" for task ids of one prefix, in order."""
    prefix = ids[0].rsplit(".", 1)[0]
    numbers = sorted(int(i.rsplit(".", 1)[1]) for i in ids)
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{prefix}.{r[0]}" + (f"–{prefix}.{r[-1]}" if len(r) > 1 else "") for r in runs)


def _by_file(tasks: list[TaskEntry]) -> str:
    files: dict[str, list[str]] = {}
    for t in tasks:
        files.setdefault(t.file, []).append(t.id)
    return "; ".join(f"`{f}` {_spans(ids)}" for f, ids in files.items()) or "–"


def tasks_section(record: TaskRecord) -> str:
    """Per public test file, the tasks its tests ran on the reference (from tasks.toml): which a
    student must write before a file's tests can pass (a scheduler test needs the block manager)."""
    prefix = record.tasks[0].id.rsplit(".", 1)[0] if record.tasks else "id"
    lines = [TASKS_BEGIN, "## Which tasks each test file needs", "",
             (f"Each task is one `raise NotImplementedError(\"{prefix}.<n>: <function>\")` in your stubs "
              f"(`grep -rn '\"{prefix}.3:'` finds task 3). Run against the reference solution on a CPU, the tests "
              "of each public file ran the code of these tasks: its tests can pass only once the tasks they run "
              "work, whichever file the tasks are in."), "",
             "| public test file | tests | tasks its tests run |", "|---|---|---|"]
    for file, count in sorted(record.files.items()):
        if not count["run"]:
            lines.append(f"| `{file}` | {count['not_run']} on a GPU | not measured (its tests need a CUDA GPU) |")
            continue
        tests = f"{count['run']}" + (f" (+{count['not_run']} on a GPU)" if count["not_run"] else "")
        lines.append(f"| `{file}` | {tests} | {_by_file([t for t in record.tasks if file in t.reached_by])} |")
    if unreached := record.unreached():
        lines += ["", "No public test runs these tasks on a CPU (hidden tests, or the GPU tests, grade them):", ""]
        lines += [f"- {t.id} `{t.function}` in `{t.file}`" + (f": {t.reason}" if t.reason else "") for t in unreached]
    return "\n".join([*lines, TASKS_END])
