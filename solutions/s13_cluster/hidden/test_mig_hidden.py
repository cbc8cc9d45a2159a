"""Hidden: the layout validator with a profile table other than the H200's (validate_layout's
`profiles` argument): an allowed start whose instance reaches past slice 7 is still refused."""

from __future__ import annotations

import pytest
from clustersim import MigProfile

from autograder.testing import in_worker


@in_worker
def refuses(layout: list, starts: list, size: int) -> bool:
    from clustersim import validate_layout

    table = {"4g.71gb": MigProfile("4g.71gb", 5, 2, 69.75, 64, tuple(starts), size)}
    try:
        validate_layout([tuple(x) for x in layout], table)
    except ValueError:
        return True
    return False


@pytest.mark.points(1)
def test_an_instance_reaching_past_the_last_slice_is_refused_whatever_the_table_allows():
    assert refuses([["4g.71gb", 6]], [0, 6], 4)       # slices 6..9: past 7
    assert not refuses([["4g.71gb", 4]], [0, 4], 4)   # slices 4..7: fits
