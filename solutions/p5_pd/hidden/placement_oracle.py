"""The judge's own model of the placement simulator, written from the handout's rules (judge side
only: the worker never runs it). Plain tuples and dicts, and different algorithms from a heap of
free prefill instances and per-dispatch catch-up of decode instances:
- prefill: with c identical FCFS servers, the earliest time a server is free is the c-th largest
  end time so far (zeros padding): request k starts at max(arrival, that).
- decode: one global clock jumping from event to event; at each time T, steps ending at T finish
  first, then requests ready at T are dispatched (trace index order), then idle instances with
  work start a step at T.

A request is (arrival_s, prompt_len, output_len); a model is the dict of LatencyModel's fields.
`run` returns rows (first_token_s, finish_s, decode_instance) in trace order.
"""

from __future__ import annotations

from bisect import insort


def prefill_s(m: dict, p: int) -> float:
    return m["prefill_base_s"] + m["prefill_per_token_s"] * p


def decode_s(m: dict, b: int) -> float:
    return m["decode_base_s"] + m["decode_per_seq_s"] * b


def transfer_s(m: dict, p: int) -> float:
    return m.get("transfer_per_token_s", 0.0) * p


def first_tokens(reqs: list[tuple], num_prefill: int, m: dict) -> list[float]:
    ends = [0.0] * num_prefill  # sorted ascending; the last num_prefill are the servers' free times
    first = [0.0] * len(reqs)
    for i in sorted(range(len(reqs)), key=lambda i: (reqs[i][0], i)):
        free = ends[-num_prefill]
        first[i] = max(reqs[i][0], free) + prefill_s(m, reqs[i][1])
        insort(ends, first[i])
    return first


def run(reqs: list[tuple], num_prefill: int, num_decode: int, m: dict, cap: int) -> list[tuple]:
    first = first_tokens(reqs, num_prefill, m)
    finish = {i: first[i] for i, r in enumerate(reqs) if r[2] == 1}
    left = {i: r[2] - 1 for i, r in enumerate(reqs) if r[2] > 1}
    pending = sorted((first[i] + transfer_s(m, reqs[i][1]), i) for i in left)
    where: dict[int, int] = {}
    started = [[] for _ in range(num_decode)]  # requests that have decoded, in the order they started
    queue = [[] for _ in range(num_decode)]    # dispatched, not yet decoding, in dispatch order
    step = [None] * num_decode                 # (end time, batch) of the step in flight
    nxt = 0
    while nxt < len(pending) or any(s is not None for s in step):
        times = [s[0] for s in step if s is not None] + ([pending[nxt][0]] if nxt < len(pending) else [])
        now = min(times)
        for k in range(num_decode):
            if step[k] is not None and step[k][0] == now:
                for i in step[k][1]:
                    left[i] -= 1
                    if left[i] == 0:
                        finish[i] = now
                        started[k].remove(i)
                step[k] = None
        while nxt < len(pending) and pending[nxt][0] == now:
            i = pending[nxt][1]
            load = [sum(1 for j, kk in where.items() if kk == k and j not in finish) for k in range(num_decode)]
            k = load.index(min(load))
            where[i] = k
            queue[k].append(i)
            nxt += 1
        for k in range(num_decode):
            if step[k] is None and (started[k] or queue[k]):
                while queue[k] and len(started[k]) < cap:
                    started[k].append(queue[k].pop(0))
                step[k] = (now + decode_s(m, len(started[k])), list(started[k]))
    return [(first[i], finish[i], where.get(i)) for i in range(len(reqs))]


def attainment(reqs: list[tuple], rows: list[tuple], slo: tuple[float, float]) -> float:
    ok = 0
    for (a, _, out), (f, e, _) in zip(reqs, rows):
        ttft_ok = f - a <= slo[0]
        ok += ttft_ok and (out == 1 or (e - f) / (out - 1) <= slo[1])
    return ok / len(reqs)


def at_rate(reqs: list[tuple], rate: float) -> list[tuple]:
    lo = min(r[0] for r in reqs)
    span = max(r[0] for r in reqs) - lo
    return [((a - lo) * (len(reqs) - 1) / (rate * span), p, o) for a, p, o in reqs]


def goodput(reqs, num_prefill, num_decode, m, slo, rates, cap, target=0.9) -> float:
    passing = [attainment(reqs_r, run(reqs_r, num_prefill, num_decode, m, cap), slo) >= target
               for reqs_r in (at_rate(reqs, r) for r in sorted(rates))]
    good = 0.0
    for r, ok in zip(sorted(rates), passing):
        if not ok:
            return good
        good = float(r)
    return good


def best_placement(reqs, m, slo, num_gpus, rates, cap, target=0.9) -> list[tuple]:
    """[(num_prefill, num_decode, goodput, per_gpu)] best first."""
    rows = []
    for total in range(2, num_gpus + 1):
        for p in range(total - 1, 0, -1):  # fewer GPUs first, then more prefill: already the tie order
            g = goodput(reqs, p, total - p, m, slo, rates, cap, target)
            rows.append((p, total - p, g, g / total))
    return sorted(rows, key=lambda r: -r[3])  # stable: ties keep the order above


def fit_line(points: list[tuple]) -> tuple[float, float]:
    """(intercept, slope) from the normal equations, each clipped to >= 0."""
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    return max(intercept, 0.0), max(slope, 0.0)
