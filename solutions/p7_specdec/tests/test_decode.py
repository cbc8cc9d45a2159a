"""speculative_generate on the course pair (float32, CPU) against transformers' models: greedy
tokens equal to the target's own greedy decoding, the rounds the greedy agreement predicts, the
sampled tokens replayed draw for draw from the same seed, and beta measured as the paper defines it."""

import pytest
import torch
from conftest import (
    acceptance_in_worker,
    assert_replays,
    betas_oracle,
    hf_logits,
    pair_dirs,
    prompt,
    replay_oracle,
    request,
    spec_runs,
)


def greedy_oracle(prompt_ids: list[int], n: int) -> list[int]:
    target, _ = pair_dirs()
    seq = list(prompt_ids)
    for _ in range(n):
        seq.append(int(hf_logits(target, seq)[-1].argmax()))
    return seq[len(prompt_ids):]


@pytest.mark.points(2)
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_output_is_the_targets_greedy_decoding(gamma):
    target, draft = pair_dirs()
    p = prompt(24)
    run = spec_runs(target, draft, p, 40, gamma, 0.0, 1.0, [0])[0]
    # the target's greedy tokens, in the rounds the greedy agreement of the two models makes
    assert_replays(run, request(24, 0, 40, gamma, 0.0, 1.0, 0), (greedy_oracle(p, 40), greedy_rounds_oracle(p, 40, gamma)))


def greedy_rounds_oracle(prompt_ids: list[int], n: int, gamma: int) -> list[int]:
    """Tokens per round when both models decode greedily: the drafts the draft's argmax chain gives,
    kept up to the first that differs from the target's argmax, plus one."""
    target, draft = pair_dirs()
    seq, rounds = list(prompt_ids), []
    while len(seq) - len(prompt_ids) < n:
        drafts = []
        for _ in range(gamma):
            drafts.append(int(hf_logits(draft, seq + drafts)[-1].argmax()))
        best = hf_logits(target, seq + drafts)[len(seq) - 1:].argmax(-1).tolist()
        k = 0
        while k < gamma and drafts[k] == best[k]:
            k += 1
        seq += drafts[:k] + [best[k]]
        rounds.append(k + 1)
    return rounds


@pytest.mark.points(2)
@pytest.mark.parametrize("gamma", [2, 4])
def test_greedy_rounds_keep_the_agreeing_drafts_and_one_more(gamma):
    target, draft = pair_dirs()
    p = prompt(20, part=1)
    run = spec_runs(target, draft, p, 30, gamma, 0.0, 1.0, [0])[0]
    assert_replays(run, request(20, 1, 30, gamma, 0.0, 1.0, 0), (greedy_oracle(p, 30), greedy_rounds_oracle(p, 30, gamma)))
    assert run["target_calls"] == len(run["rounds"]), (
        f"target_calls is {run['target_calls']} for {len(run['rounds'])} rounds: one target call per round")


def test_the_draft_runs_gamma_times_a_round():
    """Leviathan et al.'s Algorithm 1: gamma draft calls a round (d_gamma is never fed in its own
    round), plus one prefill call for a prompt of more than one token."""
    target, draft = pair_dirs()
    for n in (10, 1):
        run = spec_runs(target, draft, prompt(n), 12, 3, 0.0, 1.0, [0])[0]
        want = 3 * len(run["rounds"]) + (n > 1)
        assert run["draft_calls"] == want, (
            f"{request(n, 0, 12, 3, 0.0, 1.0, 0)}: {run['draft_calls']} draft calls in {len(run['rounds'])} rounds, "
            f"expected {want} (3 a round{', plus 1 for the prefill' if n > 1 else '; a 1-token prompt has no prefill'}): "
            f"call i feeds what the draft lacks and gives q_i; d_gamma is fed only in the next round")


@pytest.mark.points(3)
@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.8, 0.9)], ids=["T1", "T0.8-top0.9"])
def test_sampled_tokens_replay_draw_for_draw(temperature, top_p):
    target, draft = pair_dirs()
    p = prompt(16, part=2)
    run = spec_runs(target, draft, p, 24, 3, temperature, top_p, [7])[0]
    assert_replays(run, request(16, 2, 24, 3, temperature, top_p, 7), replay_oracle(p, 24, 3, temperature, top_p, seed=7))


@pytest.mark.parametrize("temperature, top_p", [(0.0, 1.0), (1.0, 0.95)], ids=["greedy", "T1-top0.95"])
def test_measured_acceptance_is_sum_of_min_p_q(tol, temperature, top_p):
    target, draft = pair_dirs()
    ids = prompt(48, part=3)
    got = acceptance_in_worker(target, draft, ids, 20, temperature, top_p)
    assert got.shape == (28,)
    torch.testing.assert_close(got, betas_oracle(ids, 20, temperature, top_p), **tol("acceptance, fp32"))
