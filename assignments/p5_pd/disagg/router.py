"""The router: each request to the prefill worker, then to the least-loaded decode worker that is alive.

It talks to its workers only through their methods (`PrefillWorker.prefill`; a decode worker's
`load`, `can_reserve`, `reserve`, `admit`, `step`), so a worker may be an object in this process
or a stub for one in another process (`disagg.remote`). A decode worker that raises
`ConnectionError` from any call is dead from then on: the router never calls it again, and every
request it held (reserved, admitted, half decoded) goes back to the front of the queue, in
submission order, to be prefilled again and decoded elsewhere; the tokens it had made are dropped
(greedy decoding makes them again). Each request finishes exactly once: a DecodeOutput for a
request that is finished already, or that the router did not send to that worker, is ignored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from .messages import DecodeOutput, PrefillRequest, Request


class Router:
    """prefill: a PrefillWorker. decoders: decode workers (DecodeWorker or remote stubs).

    max_prefill_batch: most requests sent to the prefill worker per step.
    Attributes: queue (requests waiting to be prefilled, a deque), placed ({request_id: index of the
    decode worker holding it}), finished ({request_id: DecodeOutput}), dead (indices of dead
    workers), prefills ({request_id: times it was prefilled}), log (one (request_id, worker index)
    per placement, in order).
    """

    def __init__(self, prefill: Any, decoders: list[Any], max_prefill_batch: int = 8) -> None:
        if not decoders:
            raise ValueError("a router needs at least one decode worker")
        if max_prefill_batch < 1:
            raise ValueError(f"max_prefill_batch must be >= 1, got {max_prefill_batch}")
        self.prefill, self.decoders = prefill, list(decoders)
        self.max_prefill_batch = max_prefill_batch
        self.requests: dict[int, Request] = {}
        self.queue: deque[int] = deque()
        self.placed: dict[int, int] = {}
        self.finished: dict[int, DecodeOutput] = {}
        self.dead: set[int] = set()
        self.prefills: dict[int, int] = {}
        self.log: list[tuple[int, int]] = []

    def submit(self, request: Request) -> None:
        """Queue a request (ValueError for a request_id seen before)."""
        if request.request_id in self.requests:
            raise ValueError(f"request {request.request_id} was submitted before")
        self.requests[request.request_id] = request
        self.queue.append(request.request_id)

    def has_unfinished(self) -> bool:
        return len(self.finished) < len(self.requests)

    def pick(self, request: Request) -> int | None:
        """The index of the live decode worker with the smallest `load` among those that
        `can_reserve` the request; ties: the lowest index. None when none can take it now. A worker
        raising ConnectionError is marked dead (`_bury`) and skipped."""
        raise NotImplementedError("p5.23: Router.pick")

    def step(self) -> list[DecodeOutput]:
        """One round; returns the requests that finished in it.

        1. Place: from the front of the queue, up to max_prefill_batch requests, in order: `pick`
           a worker, `reserve` there (its answer: the tokens it holds already), note the placement
           (`placed`, `log`). Stop at the first request no live worker can take. A worker that dies
           here takes back the requests this round placed on it: they are queued again (and may
           be placed again in this very round), never prefilled for the dead worker.
        2. Prefill the placed ones in one `prefill` call (skip_tokens = each reservation's answer);
           count `prefills`.
        3. `admit` each message on its worker (an answer that is a DecodeOutput finishes the request).
        4. `step` every live worker; collect what finished.
        A ConnectionError from a worker in any phase buries it (`_bury`) and the round goes on with
        the others. RuntimeError when every decode worker is dead while requests remain.
        """
        raise NotImplementedError("p5.24: Router.step")

    def _finish(self, out: DecodeOutput, where: int, done: list[DecodeOutput]) -> None:
        """Accept a worker's output once: only for a request placed on that very worker, not finished."""
        raise NotImplementedError("p5.25: Router._finish")

    def _bury(self, index: int) -> None:
        """Mark worker `index` dead; every request placed on it goes back to the front of the queue,
        in submission order, ahead of the requests already queued."""
        raise NotImplementedError("p5.26: Router._bury")

    def run(self, requests: Iterable[Request]) -> dict[int, DecodeOutput]:
        """Submit every request and step until all have finished; {request_id: DecodeOutput}.
        RuntimeError when a round makes no progress while requests wait (nothing placed, prefilled
        or finished), instead of spinning."""
        for r in requests:
            self.submit(r)
        while self.has_unfinished():
            before = (len(self.queue), len(self.finished), len(self.log))
            self.step()
            if (len(self.queue), len(self.finished), len(self.log)) == before and not self._anything_running():
                raise RuntimeError(f"no progress: {len(self.queue)} requests queued that no live worker can take")
        return {rid: self.finished[rid] for rid in self.requests}

    def _anything_running(self) -> bool:
        return any(where not in self.dead for where in self.placed.values())
