import tomllib

from autograder.authoring.calibrate import Proposal, propose, set_threshold
from autograder.host.spec import parse_spec

TOML = '''[assignment]
id = "s00_demo"
title = "t"
stage = 0
package = "demo"
editable = ["demo/*.py"]

[perf.speed]
unit = "x"
better = "higher"
thresholds = {}

[perf.latency]
better = "lower"
[perf.latency.thresholds]
h100 = { pass = 2, full = 1, env = "gpu-image-1" }
h200 = { pass = 9, full = 8, env = "gpu-image-1" }
'''


def test_proposals_scale_the_reference_value_in_the_right_direction():
    down, up = propose({"speed": [2.0, 4.0, 3.0], "lat": [6.0]}, {"speed": True, "lat": False}, 0.6, 0.9)
    assert (down.metric, down.pass_bar, down.full_bar) == ("lat", 6.0 / 0.6, 6.0 / 0.9)
    assert (up.value, up.pass_bar, up.full_bar) == (3.0, 0.6 * 3.0, 0.9 * 3.0)


def test_written_bars_parse_back_and_keep_other_tags():
    text = set_threshold(TOML, "speed", "h200", Proposal("speed", 2.0, 1.2, 1.8, True), "calibrated", "gpu-image-1")
    text = set_threshold(text, "latency", "h200", Proposal("latency", 3.0, 5.0, 3.33, False), "calibrated", "gpu-image-1")
    spec = parse_spec(tomllib.loads(text))
    assert spec.perf["speed"].thresholds["h200"].pass_bar == 1.2
    assert spec.perf["latency"].thresholds["h200"].full_bar == 3.33
    assert spec.perf["latency"].thresholds["h100"].pass_bar == 2  # untouched
    assert spec.perf["speed"].thresholds["h200"].env == "gpu-image-1"


def test_perf_only_calibration_grades_the_perf_files_alone(demo_course):
    """`calibrate --perf-only` grades only the files that hold perf tests (a long hidden suite need
    not run on a rented GPU) and still proposes a bar for each metric they record."""
    import json

    from autograder.authoring.calibrate import calibrate

    said, graded = [], demo_course.root / "graded.json"
    proposals = calibrate(course=demo_course, assignment_id="s00_demo", perf_only=True, say=said.append,
                          json_path=graded)
    assert [p.metric for p in proposals] == ["ops_ratio"] and proposals[0].value == 1.5, said
    files = {t["name"].split(": ", 1)[1].split("::")[0] for t in json.loads(graded.read_text())["tests"]}
    assert files == {"hidden/test_ops_hidden.py"}, files
