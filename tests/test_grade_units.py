from autograder.host.grade import _groups
from autograder.hardware import _nvidia_device_present


def test_files_are_dealt_into_batches_and_same_named_files_run_alone():
    files = ["hidden/test_a.py", "hidden/test_b.py", "tests/test_a.py", "tests/test_c.py"]
    assert _groups(files, 2) == [["hidden/test_a.py"], ["hidden/test_b.py", "tests/test_c.py"], ["tests/test_a.py"]]
    assert _groups(["tests/test_x.py"], 8) == [["tests/test_x.py"]]


def test_hidden_gpus_are_not_probed(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _nvidia_device_present() is False
