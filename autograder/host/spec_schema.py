"""The shape of assignment.toml as a JSON Schema: every table and key the grader reads, nothing else.

A misspelt key is not a harmless extra: `[limit]` drops the limits, `beter = "lower"` grades a
metric the wrong way round, a bar keyed `h2000` is never graded anywhere. So an unknown key or
table, a wrong type or a hardware tag no machine has is an error that names the file's table, the
key, and the nearest valid name. The semantic checks (bar order, tolerances >= 0, the given
packages) stay in spec.py; this module checks only the shape, with jsonschema.
"""

from __future__ import annotations

import difflib
import functools
import sys
from typing import Any

from autograder.hardware import KNOWN_DEVICES

HARDWARE_TAGS = ("cpu", *dict.fromkeys(tag for _, tag in KNOWN_DEVICES))

_STR, _INT, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_NUM = {"type": "number"}
_STRS = {"type": "array", "items": {"type": "string", "minLength": 1}}


def _table(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_PERF = _table({
    "description": _STR, "unit": _STR, "better": {"enum": ["higher", "lower"]},
    "thresholds": {"type": "object", "propertyNames": {"enum": list(HARDWARE_TAGS)},
                   "additionalProperties": _table({"pass": _NUM, "full": _NUM, "env": _STR}, ("pass", "full", "env"))},
})

SCHEMA: dict[str, Any] = _table({
    "assignment": _table({"id": _STR, "title": _STR, "stage": _INT, "package": _STR, "editable": _STRS},
                         ("id", "title", "stage", "package", "editable")),
    "limits": _table({"test_timeout_s": _NUM, "file_timeout_s": _NUM, "memory_mb": _INT, "forbidden": _STRS}),
    "perf": {"type": "object", "additionalProperties": _PERF},
    "accounting": _table({
        "forbidden_ops": _STRS, "require_kernels": _STRS, "forbidden_kernels": _STRS,
        "compute_in_kernels": _BOOL, "allow_ops": {"type": "object", "additionalProperties": _STR},
        "min_kernel_share": {"type": "number", "minimum": 0, "maximum": 1},
    }),
    "tolerances": {"type": "object",
                   "additionalProperties": _table({"rtol": _NUM, "atol": _NUM, "note": _STR}, ("rtol", "atol"))},
    "written": {"type": "array", "items": _table({"id": _STR, "points": _NUM, "question": _STR},
                                                 ("id", "points", "question"))},
    "given": {"type": "array", "items": _table({"file": _STR, "package": _STR, "solves": _STR, "note": _STR},
                                               ("solves",))},
}, ("assignment",))

@functools.cache
def _validator() -> Any:
    """The schema's validator, or None where jsonschema is missing: the course's environment has it
    (a dependency; `make test` and `autograder check` validate every spec), a bare GPU image may not,
    and there the specs it grades were validated before they got there."""
    try:
        import jsonschema
    except ImportError:
        print("autograder: jsonschema is not installed, so assignment.toml's keys are not checked here "
              "(make setup installs it)", file=sys.stderr)
        return None
    return jsonschema.Draft202012Validator(SCHEMA)


def check_shape(data: dict[str, Any]) -> None:
    """ValueError naming the first problem (in document order) of a parsed assignment.toml."""
    if (validator := _validator()) is None:
        return
    # document order; at one place an unknown key first (a misspelt required key is both)
    errors = sorted(validator.iter_errors(data),
                    key=lambda e: ([str(p) for p in e.absolute_path], e.validator != "additionalProperties"))
    if errors:
        raise ValueError(_describe(errors[0]))


def _where(path: list[Any]) -> str:
    """['perf', 'x', 'thresholds'] -> '[perf.x.thresholds]'; array items as '[[written]] #2'."""
    if not path:
        return "the top level"
    if isinstance(path[-1], int) or (len(path) > 1 and isinstance(path[1], int)):
        head, index, *rest = path
        return f"[[{head}]] #{index + 1}" + "".join(f".{p}" for p in rest)
    return "[" + ".".join(str(p) for p in path) + "]"


def _nearest(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(sorted(valid))}"


def _describe(error: Any) -> str:
    """One jsonschema.ValidationError as a sentence naming the table, the key and the fix."""
    path = list(error.absolute_path)
    where = _where(path)
    if error.validator == "additionalProperties":
        valid = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(valid))
        kind = "table" if path == [] else "key"
        return f"{where}: unknown {kind} {unknown[0]!r}" + _nearest(unknown[0], valid)
    if "propertyNames" in error.schema_path:  # a perf bar keyed by a tag no machine has
        tag = error.instance
        return (f"{_where(path)}: no hardware is tagged {tag!r}" + _nearest(str(tag), list(HARDWARE_TAGS))
                + " (tags: autograder/hardware.py)")
    return f"{where}: {error.message}"
