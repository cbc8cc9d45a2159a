import ast

import pytest

from autograder.errors import GraderError
from autograder.host.markers import strip_solutions

SOURCE = '''\
import math


def rms(x: float) -> float:
    """Root mean square."""
    # BEGIN SOLUTION
    return math.sqrt(x * x)
    # END SOLUTION


class Cache:
    def append(self, k: int) -> None:
        """Append k."""
        if k < 0:
            raise ValueError(k)
        # BEGIN SOLUTION
        self.items.append(k)
        # END SOLUTION
'''


def test_regions_become_raise_lines_with_task_ids_at_the_same_indent():
    stub, counter = strip_solutions(SOURCE, "f.py", "s01", 0)
    assert counter == 2
    assert '    raise NotImplementedError("s01.1: rms")\n' in stub
    assert '        raise NotImplementedError("s01.2: Cache.append")\n' in stub
    assert "math.sqrt" not in stub and "self.items" not in stub
    assert '"""Root mean square."""' in stub and "if k < 0:" in stub  # docstrings and given code stay
    ast.parse(stub)  # the stub is valid Python


def test_counter_continues_across_files():
    _, counter = strip_solutions(SOURCE, "a.py", "p1", 5)
    assert counter == 7


@pytest.mark.parametrize("text, where", [
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n", "f.py:2: BEGIN SOLUTION is never closed"),
    ("def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    # END SOLUTION\n", "f.py:3: BEGIN SOLUTION nested"),
    ("def f():\n    return 1\n    # END SOLUTION\n", "f.py:3: END SOLUTION without"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", "f.py:1: a solution region must sit inside a function"),
])
def test_marker_errors_report_file_and_line(text, where):
    with pytest.raises(GraderError) as info:
        strip_solutions(text, "f.py", "s01", 0)
    assert where in str(info.value)


def test_file_without_markers_is_unchanged():
    text = "def f():\n    return 1\n"
    assert strip_solutions(text, "f.py", "s01", 3) == (text, 3)
