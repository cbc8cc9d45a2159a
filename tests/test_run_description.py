"""The one door between the host and the judge: a run description written once and read once
(autograder/protocol/run.py), with a clear error for anything malformed."""

from __future__ import annotations

import json

import pytest

from autograder.protocol.run import RunDescription


def test_a_description_round_trips_through_its_file(tmp_path):
    run = RunDescription(package="kvcache", given=("transformer",), forbidden=("torch.nn.functional.softmax",),
                         accounting={"compute_in_kernels": True}, results=str(tmp_path / "r.jsonl"),
                         attachments=str(tmp_path / "a"), worker_hides=(str(tmp_path / "hidden"),))
    assert RunDescription.read(run.write(tmp_path / "run.json")) == run


@pytest.mark.parametrize(("fields", "message"), [
    ({"package": "not a name", "results": "r"}, "package must be a Python identifier"),
    ({"package": "p", "given": ("",), "results": "r"}, "given must be a tuple of non-empty strings"),
    ({"package": "p", "accounting": [], "results": "r"}, "accounting must be a table"),
    ({"package": "p"}, "either results .grading. or a manifest"),
    ({"package": "p", "results": "r", "manifest": "m"}, "either results .grading. or a manifest"),
])
def test_a_malformed_description_is_refused_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        RunDescription(**fields)


def test_a_file_with_an_unknown_key_is_refused(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"package": "p", "results": "r", "rseults": "x"}))
    with pytest.raises(ValueError, match=r"unknown keys \['rseults'\]"):
        RunDescription.read(path)
