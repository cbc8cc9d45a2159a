"""Shared by tests/ and hidden/: the course model, the HF greedy oracle (in the judge), and the
server the tests talk to.

Where the server runs: `start_server` is test code that runs in the worker (`in_worker`). It builds
YOUR app (`serving.build_app`) and runs it with uvicorn in a thread of the worker process, on a
socket bound to 127.0.0.1:0; the judge (this pytest process) reaches it over loopback with the
official `openai` client and with httpx. Everything the tests assert, they assert here, on what
came over the wire, against oracles computed here. `stop_server` ends it: uvicorn's shutdown runs
your app's lifespan (the engine task stops) and the socket is closed; a worker that dies takes the
thread with it, and the grader kills whatever the run leaves behind.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import pytest
import torch
from grammar_oracle import allowed_ids, constrained_greedy, greedy_with_gaps, judge_strings, schema_regex

from autograder.testing import course_model_dir, in_worker, oracle, tolerances

torch.set_num_threads(1)  # a small model: one thread is fast enough and immune to a busy machine

MODEL_NAME = "course-llama"
_TOLERANCES = tolerances(Path(__file__).parent)
_SERVERS: dict[int, tuple] = {}  # in the worker: port -> (uvicorn server, thread, socket, app)


@pytest.fixture(scope="session")
def tol():
    """tol(name) -> {"rtol": r, "atol": a}: the tolerance `name` of assignment.toml's [tolerances]."""
    return _TOLERANCES


def model_dir() -> str:
    folder = course_model_dir(MODEL_NAME)
    if folder is None:
        pytest.skip("the course model is not built here (datasets/models/course-llama)")
    return str(folder)


# ---- the server, in the worker ------------------------------------------------------------------
@in_worker
def write_adapters(adapters: dict) -> dict:
    """Write each LoRA adapter's files ({name: {file name: bytes}}) into a fresh folder of the
    worker's temporary directory; {name: folder}."""
    import tempfile

    folders = {}
    for name, files in adapters.items():
        folder = Path(tempfile.mkdtemp(prefix=f"lora-{name}-"))
        for fname, data in files.items():
            (folder / fname).write_bytes(data)
        folders[name] = str(folder)
    return folders


@in_worker
def start_server(model_path: str, max_model_len: int, engine: dict, lora: dict | None = None) -> int:
    """Build the submission's app and serve it with uvicorn in a daemon thread; the port. lora:
    {adapter name: {file name: bytes}}, served as `ServerConfig.lora_adapters`."""
    import socket
    import threading
    import time

    import uvicorn
    from serving import ServerConfig, build_app

    torch.set_num_threads(1)
    adapters = write_adapters(lora) if lora else {}
    app = build_app(ServerConfig(model_path, MODEL_NAME, max_model_len, dict(engine), lora_adapters=adapters))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"server-{port}")
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the server did not start (its lifespan failed or hung); see the output above")
        time.sleep(0.02)
    _SERVERS[port] = (server, thread, sock, app)
    return port


@in_worker
def stop_server(port: int) -> bool:
    """Ask uvicorn to exit, wait for its thread (10 s), close the socket; True if the thread ended."""
    entry = _SERVERS.pop(port, None)
    if entry is None:
        return True
    server, thread, sock, _ = entry
    server.should_exit = True
    thread.join(10)
    sock.close()
    return not thread.is_alive()


@in_worker
def engine_state(port: int) -> dict:
    """The given engine's public bookkeeping, read in the worker: free and total KV blocks, the
    sequences the scheduler still holds, the streams the AsyncEngine still serves."""
    engine = _SERVERS[port][3].state.engine
    llm = engine.llm
    return {"free_blocks": llm.block_manager.num_free_blocks, "num_blocks": llm.block_manager.num_blocks,
            "live": sorted(llm.scheduler.live), "running": len(llm.scheduler.running),
            "waiting": len(llm.scheduler.waiting), "streams": len(engine.streams)}


@in_worker
def target_weights(port: int) -> dict:
    """The weight of every target linear (q/k/v/o, gate/up/down) of the served model, read in the
    worker: a LoRALinear's wrapped nn.Linear is its `base`."""
    from serving import TARGETS

    model = _SERVERS[port][3].state.engine.llm.model_runner.model
    out = {}
    for name, module in model.named_modules():
        if name.rpartition(".")[2] in TARGETS:
            out[name] = getattr(module, "base", module).weight.detach().clone()
    return out


@in_worker
def bench_in_worker(port: int, prompts: list, outputs: list, arrivals: list) -> list[tuple]:
    """The submission's run_benchmark against the server; each record as a plain tuple."""
    import asyncio

    from serving import BenchRequest, run_benchmark

    reqs = [BenchRequest(p, n) for p, n in zip(prompts, outputs)]
    records = asyncio.run(run_benchmark(f"http://127.0.0.1:{port}", MODEL_NAME, reqs, arrivals))
    return [(r.send_s, r.first_token_s, r.end_s, r.num_output_tokens, r.num_prompt_tokens, r.ok) for r in records]


@in_worker
def watch_abort(port: int, seconds: float) -> dict:
    """Poll (every 2 ms, in the worker) until the AsyncEngine serves no stream, then give the
    scheduler 100 ms to let go of the sequence; the engine's state then, and how long each took."""
    import time

    t0 = time.monotonic()
    while engine_state(port)["streams"] and time.monotonic() - t0 < seconds:
        time.sleep(0.002)
    t1 = time.monotonic()
    state = engine_state(port)
    while state["live"] and time.monotonic() - t1 < 0.1:
        time.sleep(0.002)
        state = engine_state(port)
    return {**state, "to_streams_s": t1 - t0, "to_live_s": time.monotonic() - t1}


@contextlib.contextmanager
def serving(max_model_len: int = 256, lora: dict | None = None, **engine):
    """A running server for the block: its port. Stopped after it, whatever happened. lora: LoRA
    adapters to serve, {name: {file name: bytes}}."""
    port = start_server(model_dir(), max_model_len, engine, lora)
    try:
        yield port
    finally:
        stop_server(port)


def openai_client(port: int, **kw):
    import openai

    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0,
                         timeout=kw.pop("timeout", 120.0), **kw)


# ---- the oracle, in the judge -------------------------------------------------------------------
@functools.cache
def tokenizer():
    """tokenizer.json of the course model (what the server must encode prompts with)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(model_dir()) / "tokenizer.json"))


def encode(text: str) -> list[int]:
    return tokenizer().encode(text).ids


def decode(ids: list[int]) -> str:
    return tokenizer().decode(ids, skip_special_tokens=True)


def chat_prompt(messages: list[dict]) -> str:
    """The course chat template, from the handout's contract (the judge's own copy)."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


@functools.cache
def hf_model():
    from transformers import LlamaForCausalLM

    with oracle():
        return LlamaForCausalLM.from_pretrained(model_dir(), dtype=torch.float32).eval()


EOS = 0  # the course model's end of text


@functools.cache
def _greedy(prompt: tuple[int, ...], max_tokens: int, ignore_eos: bool) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """HF's greedy tokens (the EOS included when it stops there) and, per token, the gap between
    the top logit and the runner-up."""
    return greedy_with_gaps(hf_model(), list(prompt), max_tokens, eos=None if ignore_eos else EOS)


class Expected:
    """What a greedy request must return: the tokens, text, finish reason and usage HF gives, up to
    the first near-tie (a top-2 gap under the "greedy near-tie" tolerance, where another machine's
    summation order may pick either token): from there on only the text before it is checked."""

    def __init__(self, prompt_ids: list[int], max_tokens: int, near_tie: float, ignore_eos: bool = False,
                 model=None) -> None:
        if model is None:
            tokens, gaps = _greedy(tuple(prompt_ids), max_tokens, ignore_eos)
        else:  # another HF model on the same tokenizer (a LoRA merged into the course model)
            tokens, gaps = greedy_with_gaps(model, list(prompt_ids), max_tokens, eos=None if ignore_eos else EOS)
        self.prompt_ids, self.tokens = list(prompt_ids), list(tokens)
        cut = next((i for i, g in enumerate(gaps) if g < near_tie), None)
        self.exact = cut is None
        self.text = decode(self.tokens) if self.exact else decode(self.tokens[:cut]).rstrip("\ufffd")
        self.finish_reason = "stop" if tokens[-1] == EOS and not ignore_eos else "length"
        self.usage = (len(prompt_ids), len(tokens), len(prompt_ids) + len(tokens))

    def first_difference(self, text: str) -> str:
        """Which of HF's tokens is the first one `text` does not continue with."""
        k = next((k for k in range(len(self.tokens)) if not text.startswith(decode(self.tokens[:k + 1]).rstrip("\ufffd"))),
                 len(self.tokens))
        return f"first differing token: #{k} of {len(self.tokens)}"

    def check_text(self, text: str, where: str) -> None:
        if self.exact:
            assert text == self.text, (f"{where}: the text differs from HF greedy on the same weights ({self.first_difference(text)})"
                                       f"\n  got:  {text!r}\n  want: {self.text!r}")
        else:
            assert text.startswith(self.text), (f"{where}: the text before HF's first near-tie differs ({self.first_difference(text)})"
                                                f"\n  got:  {text!r}\n  want: {self.text!r}...")

    def check_reply(self, text: str, finish_reason: str | None, usage: tuple | None, where: str) -> None:
        self.check_text(text, where)
        if self.exact:
            assert finish_reason == self.finish_reason, f"{where}: finish_reason {finish_reason!r}, want {self.finish_reason!r} (HF greedy made {len(self.tokens)} tokens)"
        if usage is not None:
            assert usage[0] == self.usage[0], f"{where}: usage.prompt_tokens {usage[0]}, the prompt has {self.usage[0]} tokens"
            if self.exact:
                assert tuple(usage) == self.usage, f"{where}: usage (prompt, completion, total) {tuple(usage)}, want {self.usage} (the stop token counts as a completion token)"


# ---- structured output: the judge's grammar oracle against the submission's masks ----------------
def strings() -> tuple:
    return judge_strings(str(Path(model_dir()) / "tokenizer.json"))


@in_worker
def masks_in_worker(folder: str, schema: dict, prefixes: list[str]) -> list:
    """Your JsonFSM walked over each prefix (None if it dies), then your TokenMasker's allowed ids."""
    from serving import JsonFSM, TokenMasker, token_strings
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    fsm = JsonFSM(schema)
    masker = TokenMasker(fsm, token_strings(tok, tok.get_vocab_size()), EOS)
    out = []
    for prefix in prefixes:
        state = fsm.walk(fsm.start(), prefix)
        out.append(None if state is None else masker.allowed(state))
    return out


def check_masks(schema: dict, prefixes: list[str]) -> None:
    got = masks_in_worker(model_dir(), schema, prefixes)
    pattern, texts = schema_regex(schema), strings()
    for prefix, mine in zip(prefixes, got):
        want = allowed_ids(pattern, prefix, texts, EOS)
        assert mine is not None, f"after {prefix!r} (a valid prefix) your automaton died"
        extra, missing = sorted(set(mine) - set(want)), sorted(set(want) - set(mine))
        assert not extra and not missing, (
            f"after {prefix!r}: your mask allows {len(mine)} tokens, the grammar {len(want)}; "
            f"admitted but invalid: {[texts[i] if i != EOS else 'EOS' for i in extra[:8]]}; "
            f"valid but removed: {[texts[i] if i != EOS else 'EOS' for i in missing[:8]]}")


def judge_reply(prompt_ids: list[int], schema: dict, max_tokens: int, near_tie: float) -> tuple[str, bool]:
    """(the text of HF greedy under the judge's mask, True when no near-tie made it uncertain)."""
    tokens, gaps = constrained_greedy(hf_model(), prompt_ids, schema_regex(schema), strings(), EOS, max_tokens)
    cut = next((i for i, g in enumerate(gaps) if g < near_tie), None)
    kept = tokens if cut is None else tokens[:cut]
    return "".join(strings()[t] for t in kept if t != EOS), cut is None


