"""The GPU runners' workflows keep their inputs out of scripts, their tokens read-only and not
persisted, their actions pinned by commit, and hidden test names out of the job summary and log."""

import re
from pathlib import Path

import pytest
import yaml

RUNNERS = Path(__file__).resolve().parents[1] / "gpu_runners"
WORKFLOWS = {"grade-gpu.yml": {"ASSIGNMENT": "${{ inputs.assignment }}", "SUBMISSION": "${{ inputs.submission }}"},
             "grade-classroom.yml": {"ASSIGNMENT": "${{ inputs.assignment }}", "REPOSITORY": "${{ inputs.repository }}",
                                     "COMMIT": "${{ inputs.commit }}"}}


def flow(name: str) -> dict:
    return yaml.safe_load((RUNNERS / name).read_text())


def steps(name: str) -> list[dict]:
    return flow(name)["jobs"]["grade"]["steps"]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_inputs_reach_scripts_through_env_only(name):
    for step in steps(name):
        assert "${{" not in step.get("run", ""), f"an expression interpolated into the script of {step.get('name')}"
    assert flow(name)["jobs"]["grade"]["env"] == WORKFLOWS[name]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_token_is_read_only_and_not_persisted(name):
    assert flow(name)["permissions"] == {"contents": "read"}
    checkouts = [s for s in steps(name) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkouts and all(s["with"]["persist-credentials"] is False for s in checkouts)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_actions_are_pinned_by_commit(name):
    uses = [s["uses"] for s in steps(name) if "uses" in s]
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses


@pytest.mark.parametrize("name", WORKFLOWS)
def test_job_summary_carries_the_score_line_only(name):
    summary = next(s for s in steps(name) if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    assert "summary.md" not in summary["run"] and '["output"].splitlines()[0]' in summary["run"]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_grading_table_goes_to_the_artifact_not_the_log(name):
    """The grader's terminal table names hidden tests: its output is redirected into results/."""
    [grade] = [s for s in steps(name) if "autograder grade" in s.get("run", "")]
    assert re.search(r"> results/grade\.log 2>&1", grade["run"]), grade["run"]


def test_the_classroom_flow_checks_its_inputs_before_checking_anything_out():
    names = [s.get("name") or s.get("uses", "") for s in steps("grade-classroom.yml")]
    assert names[0] == "check the inputs"
    check = steps("grade-classroom.yml")[0]["run"]
    assert "^[0-9a-f]{40}$" in check and "owner/name" in check


def test_the_classroom_flow_grades_the_students_repository_at_the_commit_asked_for():
    student = next(s for s in steps("grade-classroom.yml") if s.get("with", {}).get("path") == "student")
    assert student["with"]["repository"] == "${{ inputs.repository }}" and student["with"]["ref"] == "${{ inputs.commit }}"
    runs = [s.get("run", "") for s in steps("grade-classroom.yml")]
    assert any('rev-parse HEAD)" = "$COMMIT"' in r for r in runs)
    assert any('--submission "student/assignments/$ASSIGNMENT"' in r for r in runs)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_the_runner_grades_with_the_course_installed_by_make_not_the_hosts_python(name):
    """The host side (collection, the report) needs the course's pins: `make setup` installs them in
    .venv (CPU torch: the tests themselves run in the image), and the grade step uses that venv."""
    runs = [s.get("run", "") for s in steps(name)]
    setup = next(i for i, r in enumerate(runs) if r.startswith("make setup"))
    assert "EXTRAS=docker" in runs[setup] and "TORCH_INDEX=https://download.pytorch.org/whl/cpu" in runs[setup]
    grade = next(i for i, r in enumerate(runs) if "autograder grade" in r)
    assert setup < grade and ".venv/bin/python -m autograder grade" in runs[grade]
    assert not any(re.search(r"(^|\s)python3 -m (pip|autograder)", r) for r in runs), runs
