"""Figure: how many of the course tokenizer's 8192 tokens a JSON-schema mask allows at each
character of a document: one or two inside the literal text the schema fixes, thousands inside a
string value, a handful inside an integer, only EOS at the end.

Source: the s10 reference's JsonFSM and TokenMasker (solutions/s10_serving/serving/) over the course
tokenizer (datasets/models/course-llama/tokenizer.json), on the schema and document below. Belongs
in course/stages/10-serving.md ("Structured output").
"""

from __future__ import annotations

from pathlib import Path

from course.figures._common import DECODE, PREFILL, REPO, pyplot, reference, save

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                                           "captain": {"type": "boolean"}}}
DOCUMENT = '{"name":"Ahab","age":58,"captain":true}'
TOKENIZER = REPO / "datasets" / "models" / "course-llama" / "tokenizer.json"


def data() -> dict:
    for assignment, package in (("s01_transformer", "transformer"), ("s05_kvcache", "kvcache"),
                                ("p1_minivllm", "minivllm")):
        reference(assignment, package)
    serving = reference("s10_serving", "serving")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    fsm = serving.JsonFSM(SCHEMA)
    masker = serving.TokenMasker(fsm, serving.token_strings(tok, tok.get_vocab_size()), eos_id=0)
    state, counts = fsm.start(), []
    for i in range(len(DOCUMENT) + 1):
        counts.append(len(masker.allowed(state)))
        if i < len(DOCUMENT):
            state = fsm.step(state, DOCUMENT[i])
    return {"document": DOCUMENT, "allowed": counts, "vocab": tok.get_vocab_size(), "schema": SCHEMA}


def draw(d: dict, path: str | Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 3.0))
    xs = range(len(d["allowed"]))
    colors = [PREFILL if n > 100 else DECODE for n in d["allowed"]]
    ax.bar(xs, d["allowed"], color=colors, width=0.8)
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(list(d["document"]) + ["end"], fontsize=7, family="monospace")
    ax.set_xlabel("the document so far ends before this character")
    ax.set_ylabel(f"tokens allowed (of {d['vocab']})")
    ax.set_title("A JSON-schema mask: wide open inside a string, one or two tokens in the fixed text, EOS at the end",
                 fontsize=9, loc="left")
    fig.tight_layout()
    return save(fig, path)


if __name__ == "__main__":
    from course.figures._common import PNG_DIR

    print(draw(data(), PNG_DIR / "token_mask.png"))
