"""Edge cases of the splits: heads over tp in every valid combination against the one-process
mapping (query head q reads KV head q // group), uneven stage splits, and the errors."""

from __future__ import annotations

import pytest
from tpp import shard_heads, stage_layers


@pytest.mark.points(2)
@pytest.mark.parametrize("heads,kv", [(8, 8), (8, 2), (64, 8), (6, 2), (4, 1)])
def test_every_rank_holds_the_kv_heads_its_query_heads_read(heads, kv):
    for tp in (1, 2, 4, 8, 16):
        if heads % tp or (kv % tp and tp % kv):
            with pytest.raises(ValueError):
                shard_heads(heads, kv, tp, 0)
            continue
        covered = []
        for r in range(tp):
            s = shard_heads(heads, kv, tp, r)
            covered += range(s.q_start, s.q_end)
            needed = {q // (heads // kv) for q in range(s.q_start, s.q_end)}
            assert set(range(s.kv_start, s.kv_end)) == needed, (
                f"{heads} heads / {kv} KV heads, tp={tp}, rank {r}: holds KV heads [{s.kv_start}, {s.kv_end}), "
                f"its query heads read {sorted(needed)}")
        assert covered == list(range(heads)), f"tp={tp}: query heads covered {covered}"


@pytest.mark.points(1)
def test_uneven_stage_splits_put_the_extra_layers_first():
    assert [stage_layers(10, 4, s) for s in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [stage_layers(3, 3, s) for s in range(3)] == [(0, 1), (1, 2), (2, 3)]
    with pytest.raises(ValueError):
        stage_layers(5, 2, 2)
