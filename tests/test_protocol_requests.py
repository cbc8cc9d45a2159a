"""The judge -> worker requests are typed (autograder/protocol/requests.py): both ends parse a
request's wire fields into one dataclass per operation, and a message of the wrong shape is a
ProtocolError that names the operation, never an IndexError inside a call."""

from __future__ import annotations

import pytest

from autograder.protocol import requests
from autograder.protocol.messages import Op
from autograder.protocol.wire import ProtocolError


@pytest.mark.parametrize("op, fields", [
    (Op.HELLO, ()),
    (Op.BEGIN_TEST, ("t.py::test_x", ["torch.x"], {}, [])),
    (Op.END_TEST, ()),
    (Op.GETATTR, (object(), "name")),
    (Op.SETATTR, (object(), "name", 3)),
    (Op.DELATTR, (object(), "name")),
    (Op.CALL, (print, [1], {"a": 2})),
    (Op.CALL_METHOD, (object(), "m", [], {})),
    (Op.SPECIAL, (object(), "len", [])),
    (Op.SHIPPED, ("/t/test_x.py", "test_x", "f", (), {})),
    (Op.SHIPPED, ("/t/test_x.py", "test_x", "f", (), {}, "source text")),
    (Op.MEASURE, (object(), "timed", {"reps": 3})),
])
def test_every_operation_parses_to_its_own_type_and_gives_its_fields_back_in_wire_order(op, fields):
    request = requests.parse(op, fields)
    assert type(request).op is op
    assert request.fields()[:len(fields)] == tuple(fields)


@pytest.mark.parametrize("op, fields, words", [
    (Op.GETATTR, (object(),), "getattr: 1 fields, expected 2"),
    (Op.CALL, (print, [], {}, "extra"), "call: 4 fields, expected 3"),
    (Op.SHIPPED, ("p", "m"), "shipped: 2 fields, expected 5 to 6"),
    (Op.GETATTR, (object(), 7), "getattr name: expected str, got int"),
    (Op.BEGIN_TEST, (b"id", [], {}, []), "begin nodeid: expected str, got bytes"),
    (Op.MEASURE, (object(), "sleep", {}), "unknown phase 'sleep'"),
    (Op.MEASURE, (object(), "timed", []), "measure options: expected dict, got list"),
    (Op.REPLY, (), "unknown request"),
])
def test_a_request_of_the_wrong_shape_is_a_protocol_error_naming_it(op, fields, words):
    with pytest.raises(ProtocolError, match=words.replace("(", r"\(")):
        requests.parse(op, fields)


def test_every_request_operation_has_a_type():
    answers = {Op.REPLY, Op.RAISED, Op.CALLBACK}
    assert set(requests.REQUESTS) == set(Op) - answers
