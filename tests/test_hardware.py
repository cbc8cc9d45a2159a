import pytest

from autograder.hardware import hardware_tag, tag_from_device_name


@pytest.mark.parametrize("name, tag", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
    ("NVIDIA GH200 480GB", "gh200"), ("Tesla T4", "t4"), ("Some Future GPU", "gpu-some-future-gpu"),
])
def test_device_names_map_to_tags(name, tag):
    assert tag_from_device_name(name) == tag


def test_override_and_environment_take_precedence(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_HARDWARE", "H100")
    assert hardware_tag() == "h100"
    assert hardware_tag("A100") == "a100"
