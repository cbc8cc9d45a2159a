"""Hidden: the scheduler's edges that mechanical mutation testing found untested: a block size that
is not a power of two (slot = block * size + offset, not a bit-or or a shift), a batch applied twice
(the second `update` is stale even though the sequence still runs), and a generation longer than
256 tokens (finished by comparing counts, not by identity of small interned ints)."""

from __future__ import annotations

import pytest

from conftest import drive, make_scheduler
from kvcache import Sequence, slot_mapping


@pytest.mark.points(1)
def test_slot_mapping_with_a_block_size_that_is_not_a_power_of_two():
    # positions 1..7, block_size 3: blocks [5, 5, 2, 2, 2, 7, 7], offsets [1, 2, 0, 1, 2, 0, 1]
    assert slot_mapping([5, 2, 7], 1, 7, 3) == (16, 17, 6, 7, 8, 21, 22)
    assert slot_mapping([4, 1], 4, 3, 6) == (28, 29, 6)  # block_size 6: 4*6+4, 4*6+5, then 1*6+0


@pytest.mark.points(1)
def test_a_batch_applied_twice_is_stale_while_its_sequence_still_runs():
    sched = make_scheduler(num_blocks=8, block_size=4, max_num_seqs=2, max_num_batched_tokens=8, max_model_len=16)
    sched.add(Sequence(0, [1, 2, 3, 4, 5], max_tokens=4))
    batch = sched.schedule()
    sched.update(batch, {0: 7})
    with pytest.raises(ValueError):
        sched.update(batch, {0: 7})  # num_computed_tokens moved past the entry's start: a replayed batch


@pytest.mark.points(1)
def test_a_generation_of_300_tokens_finishes_at_exactly_300():
    sched = make_scheduler(num_blocks=80, block_size=4, max_num_seqs=2, max_num_batched_tokens=16, max_model_len=320)
    log = drive(sched, [Sequence(0, [1, 2, 3], max_tokens=300)], [0], max_steps=400)
    assert log.samples[0] == 300
