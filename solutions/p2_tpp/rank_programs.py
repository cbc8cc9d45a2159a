"""What the multi-rank tests run on every rank, and the judge-side checks of what the ranks return
(shared by tests/ and hidden/). A rank's results are its word: its tokens are checked here against
HF generate on the same weights; its events against the schedule the handout defines.

The judge's own facts: the stage split of the handout (earlier stages take the extra layer), the
micro-batch split (contiguous, larger first), and HF's tokens."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import ENGINE, HIDDEN, LAYERS, NEAR_TIE, counting_collectives
from tpp import ParallelLLM, SamplingParams


def serve_on_rank(path: str, tp: int, pp: int, microbatches: int, prompts: list[list[int]], n: int,
                  record: bool = False, temperature: float = 0.0, engine: dict | None = None) -> dict:
    """This rank's engine serves every prompt for n tokens; returns its tokens, its collective counts
    and (record) its events. engine: the engine options (default ENGINE: the CPU tier's)."""
    import torch.distributed as dist

    llm = ParallelLLM(path, tp=tp, pp=pp, num_microbatches=microbatches, record_timeline=record, **(engine or ENGINE))
    params = SamplingParams(temperature=temperature, max_tokens=n, ignore_eos=True)
    with counting_collectives() as counts:
        outs = llm.generate(prompts, params)
    return dict(rank=dist.get_rank(), tokens=[list(o.outputs[0].token_ids) for o in outs], counts=dict(counts),
                events=llm.events() if record else [])


def bad_inputs_on_rank(path: str, tp: int, pp: int, too_long: list[int], prompt: list[int]) -> dict:
    """A prompt longer than the cache, then an empty batch: the error each raised on this rank (or
    None); then one good request, which only completes if every rank is still in step."""
    llm = ParallelLLM(path, tp=tp, pp=pp, **ENGINE)
    errors = {}
    for case, prompts in (("too long", [too_long]), ("empty", [])):
        try:
            llm.generate(prompts, SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
            errors[case] = None
        except ValueError as err:
            errors[case] = str(err)
    out = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    return dict(errors=errors, tokens=list(out[0].outputs[0].token_ids))


# ---- judge-side checks -------------------------------------------------------------------------------
def stage_of(layers: int, pp: int, stage: int) -> range:
    """The handout's split: as even as can be, the earlier stages take the extra layers."""
    base, extra = divmod(layers, pp)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (stage < extra))


def check_tokens(results: list[dict], expected: list[list[int]], case: str) -> None:
    """Every rank's tokens equal HF's, prompt by prompt; a failure names the rank, prompt and step.
    Against HF (`HFTokens`), a divergence at a near-tie of HF's own logits (within NEAR_TIE) ends
    that prompt's comparison instead of failing: another CPU's summation order may pick either."""
    for res in results:
        for i, (got, want) in enumerate(zip(res["tokens"], expected, strict=True)):
            if got == want:
                continue
            step = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            margin = ""
            if hasattr(expected, "gap") and step < min(len(got), len(want)) and len(got) == len(want):
                gap = expected.gap(i, got[:step], got[step])
                if gap <= NEAR_TIE:
                    continue
                margin = f"; HF's logit for {got[step]} is {gap:.3g} below its top (a near-tie is within {NEAR_TIE:g})"
            pytest.fail(f"{case}: rank {res['rank']}, prompt {i}: token {step} is "
                        f"{got[step] if step < len(got) else 'missing'}, HF generate gives "
                        f"{want[step] if step < len(want) else 'nothing'} ({len(got)} tokens, {len(want)} expected; "
                        f"the first {step} agree{margin})")


def microbatches(pp: int, m: int, num_seqs: int) -> int:
    return min(m, num_seqs) if pp > 1 else 1


def check_counts(results: list[dict], *, tp: int, pp: int, m: int, num_prompts: int, n: int, case: str) -> None:
    """Per rank, over n steps of num_prompts sequences: one all-reduce for the embedding (first stage)
    and two per layer per micro-batch, one all-gather of the logits per micro-batch (last stage);
    micro-batches cross stages through batch_isend_irecv only."""
    mbs = microbatches(pp, m, num_prompts)
    for res in results:
        stage = res["rank"] // tp
        layers = len(stage_of(LAYERS, pp, stage))
        counts = Counter(res["counts"])
        want = {"all_reduce": n * mbs * (2 * layers + (stage == 0)) if tp > 1 else 0,
                "all_gather": n * mbs if tp > 1 and stage == pp - 1 else 0}
        got = {k: counts[k] for k in want}
        assert got == want, (f"{case}: rank {res['rank']} (stage {stage}, {layers} layers) made {got} over {n} steps "
                             f"of {mbs} micro-batch(es); expected {want}: per micro-batch 2 all-reduces a layer "
                             f"+ 1 for the embedding on the first stage, 1 logits all-gather on the last")
        plain = {k: counts[k] for k in ("send", "recv", "isend", "irecv") if counts[k]}
        assert not plain, f"{case}: rank {res['rank']} sent activations outside batch_isend_irecv: {plain}"
        if pp > 1:
            sides = (stage < pp - 1) + (stage > 0)
            assert counts["batch_isend_irecv"] >= n * mbs * sides, (
                f"{case}: rank {res['rank']} called batch_isend_irecv {counts['batch_isend_irecv']} times over {n} "
                f"steps of {mbs} micro-batches; each micro-batch crosses each of its {sides} stage boundaries")


def by_key(events: list[dict], kind: str) -> dict:
    """(step, microbatch) -> that rank's events of `kind`, in order."""
    out: dict = {}
    for e in events:
        if e["kind"] == kind:
            out.setdefault((e["step"], e["microbatch"]), []).append(e)
    return out


def check_layer_reduces(results: list[dict], *, tp: int, pp: int, case: str) -> None:
    """Each (step, micro-batch) of each rank: one all-reduce "layer l o_proj" and one "layer l down_proj"
    per layer of its stage, "embedding" on the first stage, nothing else."""
    for res in results:
        stage = res["rank"] // tp
        want = sorted([f"layer {l} o_proj" for l in stage_of(LAYERS, pp, stage)]
                      + [f"layer {l} down_proj" for l in stage_of(LAYERS, pp, stage)] + ["embedding"] * (stage == 0))
        reduces = by_key(res["events"], "all_reduce")
        assert reduces, f"{case}: rank {res['rank']} recorded no all_reduce event"
        for key, evs in sorted(reduces.items()):
            got = sorted(e["name"] for e in evs)
            assert got == want, f"{case}: rank {res['rank']}, step {key[0]}, micro-batch {key[1]}: all-reduces {got}, expected {want}"
            assert all(e["bytes"] % (HIDDEN * 4) == 0 and e["bytes"] > 0 for e in evs), (
                f"{case}: rank {res['rank']}, step {key[0]}: all-reduce bytes {[e['bytes'] for e in evs]} are not "
                f"whole (tokens, {HIDDEN}) fp32 rows")


COMM_KINDS = ("all_reduce", "all_gather", "send", "recv", "broadcast")


def check_spans(results: list[dict], *, tp: int, m: int, num_prompts: int, vocab: int, case: str) -> None:
    """The handout's timeline rules on each rank: no compute span overlaps a communication span
    (a compute span ends before the collective that follows starts), and an all-gather's bytes are
    what this rank put in: in a decode step, one row of its vocab_size / tp fp32 logits per sequence
    of the micro-batch, not the gathered output."""
    shard_row = vocab // tp * 4
    per_mb = [num_prompts // m + (i < num_prompts % m) for i in range(m)]
    for res in results:
        events = res["events"]
        comms = [e for e in events if e["kind"] in COMM_KINDS]
        for c in (e for e in events if e["kind"] == "compute"):
            inside = [e for e in comms if e["start_ns"] < c["end_ns"] and c["start_ns"] < e["end_ns"]]
            assert not inside, (f"{case}: rank {res['rank']}, step {c['step']}: the compute span {c['name']!r} overlaps "
                                f"the {inside[0]['kind']} span {inside[0]['name']!r}: a compute span must end before "
                                f"the collective that follows it starts")
        for e in (e for e in events if e["kind"] == "all_gather" and e["step"] > 0):
            want = per_mb[e["microbatch"]] * shard_row
            assert e["bytes"] == want, (
                f"{case}: rank {res['rank']}, decode step {e['step']}, micro-batch {e['microbatch']}: all-gather "
                f"{e['name']!r} recorded {e['bytes']} bytes, expected {want} ({per_mb[e['microbatch']]} rows of this "
                f"rank's {vocab // tp} fp32 logits): the bytes are what this rank put in, not the gathered output")


def _intersect(a: list[dict], b: list[dict]) -> bool:
    """Whether the time spans [first start, last end] of two lists of events intersect."""
    return (min(e["start_ns"] for e in a) < max(e["end_ns"] for e in b)
            and min(e["start_ns"] for e in b) < max(e["end_ns"] for e in a))


def check_pipeline_order(results: list[dict], *, tp: int, m: int, num_prompts: int, n: int, case: str) -> int:
    """Two stages: for every step and micro-batch, stage 0's send starts after its compute of that
    micro-batch ends, and stage 1 starts computing it only after the send began. Returns the number
    of steps in which stage 0 computed micro-batch 1 while stage 1 computed micro-batch 0 (their
    compute intervals intersect: a stage that computes every micro-batch before sending the first
    has none)."""
    overlapped = 0
    per_mb = [num_prompts // m + (i < num_prompts % m) for i in range(m)]
    for t in range(tp):
        first, second = results[t], results[tp + t]
        sends, c0, c1 = by_key(first["events"], "send"), by_key(first["events"], "compute"), by_key(second["events"], "compute")
        for step in range(n):
            for mb in range(m):
                key = (step, mb)
                assert key in sends and key in c0 and key in c1, (
                    f"{case}: step {step}, micro-batch {mb}: missing events (stage 0 send: {key in sends}, "
                    f"stage 0 compute: {key in c0}, stage 1 compute: {key in c1}) on tp column {t}")
                [send] = sends[key]
                assert send["peer"] == tp + t, f"{case}: rank {t} sent micro-batch {mb} to {send['peer']}, not {tp + t}"
                if step > 0:
                    assert send["bytes"] == per_mb[mb] * HIDDEN * 4, (
                        f"{case}: rank {t}, decode step {step}, micro-batch {mb}: sent {send['bytes']} bytes, "
                        f"expected {per_mb[mb]} rows of {HIDDEN} fp32")
                done = max(e["end_ns"] for e in c0[key])
                assert send["start_ns"] >= done, (f"{case}: rank {t}, step {step}, micro-batch {mb}: the send began "
                                                  f"{(done - send['start_ns']) / 1e3:.0f} us before its compute ended")
                begun = min(e["start_ns"] for e in c1[key])
                assert begun >= send["start_ns"], (f"{case}: rank {tp + t}, step {step}, micro-batch {mb}: computed "
                                                   f"{(send['start_ns'] - begun) / 1e3:.0f} us before stage 0 sent it")
            if m > 1 and _intersect(c0[(step, 1)], c1[(step, 0)]):
                overlapped += 1
    return overlapped
