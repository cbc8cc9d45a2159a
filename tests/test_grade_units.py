from autograder.host.runs import _groups
from autograder.hardware import _nvidia_device_present


def test_files_are_dealt_into_batches_public_apart_from_hidden():
    files = ["hidden/test_a.py", "hidden/test_b.py", "tests/test_a.py", "tests/test_c.py"]
    assert _groups(files, 2) == [["tests/test_a.py", "tests/test_c.py"], ["hidden/test_a.py", "hidden/test_b.py"]]
    assert _groups(files, 4) == [["tests/test_a.py"], ["tests/test_c.py"], ["hidden/test_a.py"], ["hidden/test_b.py"]]
    assert _groups(["tests/test_x.py"], 8) == [["tests/test_x.py"]]
    assert _groups(["tests/test_x.py", "tests/sub/test_x.py"], 1) == [["tests/test_x.py"], ["tests/sub/test_x.py"]]


def test_hidden_gpus_are_not_probed(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _nvidia_device_present() is False
