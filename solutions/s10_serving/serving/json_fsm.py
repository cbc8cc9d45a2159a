"""A character automaton for the course's JSON-schema subset: the texts it accepts are exactly the
compact JSON documents the schema allows, properties in the schema's order.

The subset (anything else is a ValueError):

    {"type": "object",
     "properties": {"<name>": <value>, ...},        1 to 8 names matching [A-Za-z_][A-Za-z0-9_]*
     "required": [every name],                      optional; all properties are required anyway
     "additionalProperties": false}                 optional
    <value> = {"type": "string", "maxLength": k}    k in 0..64, default 24; characters: printable
                                                    ASCII (space to ~) except '"' and '\\'
            | {"type": "integer"}                   -?(0|[1-9][0-9]{0,8})
            | {"type": "boolean"}                   true | false
            | {"enum": ["a", "b", ...]}             one of the strings (same characters as above)

The document is written without whitespace: {"name":"Ahab","age":58,"captain":true}. It compiles
to a list of pieces: literal text ('{"name":', ',"age":', '}') between value pieces. A state is
(piece index, that piece's own state); `step` consumes one character or returns None (dead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_PROPERTIES, MAX_STRING, INT_DIGITS = 8, 64, 9


def string_char(ch: str) -> bool:
    """A character a string value may hold: printable ASCII except '"' and '\\'."""
    return " " <= ch <= "~" and ch not in '"\\'


@dataclass(frozen=True)
class Literal:
    text: str            # state: how many characters were consumed


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]  # state: the prefix typed so far; options are prefix-free


@dataclass(frozen=True)
class StringValue:
    max_len: int         # state: -1 before the opening quote, n characters after it, -2 once closed


@dataclass(frozen=True)
class IntegerValue:
    pass                 # state: (digits so far, a '-' was typed, the first digit was 0)


Piece = Literal | Choice | StringValue | IntegerValue
State = tuple[int, object]


def compile_schema(schema: dict) -> list[Piece]:
    """The pieces of `schema` (see the module docstring); ValueError outside the subset."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("the schema must be an object schema ({'type': 'object', ...})")
    props = schema.get("properties")
    if not isinstance(props, dict) or not 1 <= len(props) <= MAX_PROPERTIES:
        raise ValueError(f"the schema needs 1 to {MAX_PROPERTIES} properties")
    if schema.get("additionalProperties", False) is not False:
        raise ValueError("additionalProperties must be false (or absent)")
    if set(schema.get("required", props)) != set(props):
        raise ValueError("every property must be required")
    pieces: list[Piece] = []
    for i, (name, value) in enumerate(props.items()):
        if not NAME.fullmatch(name):
            raise ValueError(f"property name {name!r} must match {NAME.pattern}")
        pieces.append(Literal(("{" if i == 0 else ",") + f'"{name}":'))
        pieces.append(_value_piece(name, value))
    pieces.append(Literal("}"))
    return pieces


def _value_piece(name: str, value: dict) -> Piece:
    if not isinstance(value, dict):
        raise ValueError(f"{name}: a value schema must be an object")  # noqa: TRY004  one error type
    if "enum" in value:
        opts = value["enum"]
        if not opts or not all(isinstance(o, str) and all(map(string_char, o)) for o in opts):
            raise ValueError(f"{name}: enum must list strings of printable ASCII without '\"' or '\\\\'")
        return Choice(tuple(dict.fromkeys(f'"{o}"' for o in opts)))
    kind = value.get("type")
    if kind == "string":
        k = value.get("maxLength", 24)
        if not isinstance(k, int) or not 0 <= k <= MAX_STRING:
            raise ValueError(f"{name}: maxLength must be an integer in 0..{MAX_STRING}")
        return StringValue(k)
    if kind == "integer":
        return IntegerValue()
    if kind == "boolean":
        return Choice(("true", "false"))
    raise ValueError(f"{name}: unsupported value schema {value!r} (string, integer, boolean or enum)")


def piece_start(piece: Piece) -> object:
    """The state of a piece before its first character."""
    if isinstance(piece, Literal):
        return 0
    if isinstance(piece, Choice):
        return ""
    if isinstance(piece, StringValue):
        return -1
    return (0, False, False)


def piece_step(piece: Piece, sub: object, ch: str) -> object | None:
    """The piece's state after `ch`, or None when the piece cannot take `ch` (its grammar above)."""
    # BEGIN SOLUTION
    if isinstance(piece, Literal):
        return sub + 1 if sub < len(piece.text) and piece.text[sub] == ch else None
    if isinstance(piece, Choice):
        typed = sub + ch
        return typed if any(o.startswith(typed) for o in piece.options) else None
    if isinstance(piece, StringValue):
        if sub == -1:
            return 0 if ch == '"' else None
        if sub == -2:
            return None
        if ch == '"':
            return -2
        return sub + 1 if string_char(ch) and sub < piece.max_len else None
    digits, minus, zero = sub
    if ch == "-" and digits == 0 and not minus:
        return (0, True, False)
    if not ch.isdigit() or not "0" <= ch <= "9" or zero or digits >= INT_DIGITS:
        return None
    return (digits + 1, minus, digits == 0 and ch == "0")
    # END SOLUTION


def piece_done(piece: Piece, sub: object) -> bool:
    """True when the piece may end in state `sub`."""
    # BEGIN SOLUTION
    if isinstance(piece, Literal):
        return sub == len(piece.text)
    if isinstance(piece, Choice):
        return sub in piece.options
    if isinstance(piece, StringValue):
        return sub == -2
    return sub[0] >= 1
    # END SOLUTION


class JsonFSM:
    """The automaton of one schema. States are hashable (piece index, piece state) tuples."""

    def __init__(self, schema: dict) -> None:
        self.pieces = compile_schema(schema)

    def start(self) -> State:
        return (0, piece_start(self.pieces[0]))

    def step(self, state: State, ch: str) -> State | None:
        """The state after `ch`: the current piece takes it if it can; otherwise, if the current
        piece may end here, the next piece must take it; otherwise None. (The pieces are built so
        that at most one of the two can take a character.)"""
        # BEGIN SOLUTION
        i, sub = state
        nxt = piece_step(self.pieces[i], sub, ch)
        if nxt is not None:
            return (i, nxt)
        if piece_done(self.pieces[i], sub) and i + 1 < len(self.pieces):
            after = piece_step(self.pieces[i + 1], piece_start(self.pieces[i + 1]), ch)
            if after is not None:
                return (i + 1, after)
        return None
        # END SOLUTION

    def walk(self, state: State | None, text: str) -> State | None:
        """`step` over each character of text; None as soon as one dies."""
        for ch in text:
            if state is None:
                return None
            state = self.step(state, ch)
        return state

    def is_final(self, state: State) -> bool:
        """True when the document is complete: the last piece ('}') is done."""
        i, sub = state
        return i == len(self.pieces) - 1 and piece_done(self.pieces[i], sub)
