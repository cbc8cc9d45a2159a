"""Who holds what: even splits, query and KV heads over tp (KV heads replicated past their count),
layers over stages (the earlier stages take the extra), micro-batches, and the order in which one
process samples a step's rows."""

from __future__ import annotations

import pytest
from autograder.testing import in_worker
from tpp import sampling_order, shard_heads, split_microbatches, split_range, stage_layers


@pytest.mark.points(1)
def test_split_range_gives_each_rank_its_contiguous_share():
    assert [tuple(split_range(256, r, 4)) for r in range(4)] == [(0, 64), (64, 128), (128, 192), (192, 256)]
    with pytest.raises(ValueError):
        split_range(10, 0, 4)


@pytest.mark.points(2)
def test_heads_split_and_kv_heads_replicate_past_their_count():
    def cut(tp: int, r: int) -> tuple[int, int, int, int]:
        h = shard_heads(4, 2, tp, r)
        return h.q_start, h.q_end, h.kv_start, h.kv_end

    got = {tp: [cut(tp, r) for r in range(tp)] for tp in (1, 2, 4)}
    assert got[1] == [(0, 4, 0, 2)]
    assert got[2] == [(0, 2, 0, 1), (2, 4, 1, 2)]
    # TP=4 over 2 KV heads: query head q reads KV head q // 2, so ranks 0-1 hold KV head 0, ranks 2-3 KV head 1
    assert got[4] == [(0, 1, 0, 1), (1, 2, 0, 1), (2, 3, 1, 2), (3, 4, 1, 2)]
    with pytest.raises(ValueError):
        shard_heads(6, 2, 4, 0)  # 6 query heads do not split over 4 ranks


@pytest.mark.points(2)
def test_stages_split_layers_with_the_extra_on_earlier_stages():
    assert [stage_layers(5, 2, s) for s in range(2)] == [(0, 3), (3, 5)]
    assert [stage_layers(80, 2, s) for s in range(2)] == [(0, 40), (40, 80)]
    assert [stage_layers(7, 3, s) for s in range(3)] == [(0, 3), (3, 5), (5, 7)]
    with pytest.raises(ValueError):
        stage_layers(2, 3, 0)


@pytest.mark.points(1)
def test_microbatches_are_contiguous_and_larger_first():
    cut = split_microbatches([10, 11, 12, 13, 14], 2)  # entries are taken as they are: ints stand in here
    assert [list(mb.entries) for mb in cut] == [[10, 11, 12], [13, 14]]
    assert [list(mb.entries) for mb in split_microbatches([10], 4)] == [[10]]


@in_worker
def order_of(shapes: list[tuple[int, bool]]) -> list[int]:
    from types import SimpleNamespace

    return sampling_order([SimpleNamespace(seq_id=i, num_tokens=n, samples=s) for i, (n, s) in enumerate(shapes)])


@pytest.mark.points(1)
def test_sampling_order_is_one_process_row_order():
    # entries of 7, 1, 3 and 1 tokens; the 3-token one is a prefill chunk that does not sample
    assert order_of([(7, True), (1, True), (3, False), (1, True)]) == [1, 3, 0]
