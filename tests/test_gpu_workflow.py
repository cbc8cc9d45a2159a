"""The GPU runner's workflow keeps its inputs out of scripts, its token read-only and not
persisted, its actions pinned by commit, and hidden test names out of the job summary."""

import re
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / "gpu_runners" / "grade-gpu.yml"


def steps() -> list[dict]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["grade"]["steps"]


def test_inputs_reach_scripts_through_env_only():
    for step in steps():
        assert "${{" not in step.get("run", ""), f"an expression interpolated into the script of {step.get('name')}"
    env = yaml.safe_load(WORKFLOW.read_text())["jobs"]["grade"]["env"]
    assert env == {"ASSIGNMENT": "${{ inputs.assignment }}", "SUBMISSION": "${{ inputs.submission }}"}


def test_token_is_read_only_and_not_persisted():
    flow = yaml.safe_load(WORKFLOW.read_text())
    assert flow["permissions"] == {"contents": "read"}
    checkout = next(s for s in steps() if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False


def test_actions_are_pinned_by_commit():
    uses = [s["uses"] for s in steps() if "uses" in s]
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses


def test_job_summary_carries_the_score_line_only():
    summary = next(s for s in steps() if "GITHUB_STEP_SUMMARY" in s.get("run", ""))
    assert "summary.md" not in summary["run"] and '["output"].splitlines()[0]' in summary["run"]
