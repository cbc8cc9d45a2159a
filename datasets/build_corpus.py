"""Build the course corpus: fetch the sources, extract plain text, split train/eval deterministically.

    python datasets/build_corpus.py

Downloads and extracted packages are cached under datasets/.cache/ (git-ignored). Outputs:
  datasets/.cache/corpus/train.txt        training text of the five sources (not committed)
  datasets/.cache/corpus/train_extra.txt  training text of the train-only sources (not committed)
  datasets/eval/eval.txt                  the held-out eval slice (committed, about 1 MB)
  datasets/corpus_manifest.json           per-source sizes and the SHA-256 of each file (committed)

Both splits are sequences of chunks (a few KB of consecutive paragraphs of one document), each
followed by the end-of-text marker. A chunk goes to eval when the SHA-1 of its key
"source/document/index" falls in the lowest EVAL_PER_MILLE of the hash range: the split depends
only on the text, never on a random state or on file-system order. The train-only sources
(extra_sources.py) send every chunk to train_extra.txt, so the eval slice and the tokenizer,
trained on train.txt alone, do not depend on them; the build fails if a 200-character stretch
of the eval slice occurs in their text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import unicodedata
from pathlib import Path

from corpus_sources import SOURCES, Documents, fetch, manifest_entry, unpack
from extra_sources import EXTRA_SOURCES

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
EOT = "<|endoftext|>"
CHUNK_CHARS = 3000  # a chunk closes once it holds at least this many characters
EVAL_PER_MILLE = 40  # about 4% of chunks, about 1 MB of text
LEAK_CHARS = 200  # no stretch this long of the eval slice may occur in the train-only text


def ensure_cache() -> Path:
    """Create datasets/.cache with a .gitignore of its own, so it never travels or gets committed."""
    CACHE.mkdir(exist_ok=True)
    (CACHE / ".gitignore").write_text("*\n")
    return CACHE


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\t", " ")
    text = text.replace(EOT, "")  # the marker must never occur inside a document
    text = re.sub(r"[ \u00a0]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def split_long(paragraph: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Cut a paragraph longer than `limit` at sentence ends (the speeches have no line breaks)."""
    if len(paragraph) <= limit:
        return [paragraph]
    sentences = re.split(r"(?<=[.!?]) (?=[A-Z\"'])", paragraph)
    pieces, current = [], ""
    for s in sentences:
        if current and len(current) + len(s) + 1 > limit:
            pieces.append(current)
            current = s
        else:
            current = f"{current} {s}" if current else s
    return pieces + [current] if current else pieces


def chunks(doc_text: str) -> list[str]:
    """Group consecutive paragraphs into chunks of at least CHUNK_CHARS characters."""
    units = [u for p in doc_text.split("\n\n") for u in split_long(p)]
    out, current = [], []
    for unit in units:
        current.append(unit)
        if sum(len(u) + 2 for u in current) >= CHUNK_CHARS:
            out.append("\n\n".join(current))
            current = []
    if current:
        out.append("\n\n".join(current))
    return out


def is_eval(key: str) -> bool:
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % 1000 < EVAL_PER_MILLE


def split_source(name: str, docs: Documents,
                 train_only: bool = False) -> tuple[list[str], list[str]]:
    train, evals = [], []
    for doc_id, text in docs:
        for k, chunk in enumerate(chunks(normalise(text))):
            to_eval = not train_only and is_eval(f"{name}/{doc_id}/{k}")
            (evals if to_eval else train).append(chunk)
    return train, evals


def shared_stretches(reference: str, text: str, length: int = LEAK_CHARS) -> list[tuple[int, int]]:
    """(offset in text, length) of each stretch of at least `length` characters that `text`
    shares with `reference`. Windows of `length - step + 1` characters of the reference, at
    every offset, are looked up at every `step`-th offset of the text: a shared stretch of
    `length` characters always covers one such lookup."""
    step = length // 4
    width = length - step + 1
    where: dict[int, list[int]] = {}
    for i in range(len(reference) - width + 1):
        where.setdefault(hash(reference[i:i + width]), []).append(i)
    found: list[tuple[int, int]] = []
    for p in range(0, len(text) - width + 1, step):
        if found and p < sum(found[-1]):
            continue  # inside the stretch just found
        best = (p, 0)
        for j in where.get(hash(text[p:p + width]), ()):
            if reference[j:j + width] != text[p:p + width]:
                continue  # a hash collision
            a, b = p, j  # extend the match both ways
            while a > 0 and b > 0 and text[a - 1] == reference[b - 1]:
                a, b = a - 1, b - 1
            e, f = p + width, j + width
            while e < len(text) and f < len(reference) and text[e] == reference[f]:
                e, f = e + 1, f + 1
            best = max(best, (a, e - a), key=lambda stretch: stretch[1])
        if best[1] >= length:
            found.append(best)
    return found


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build(out_eval: Path, out_train: Path, out_extra: Path) -> dict:
    cache = ensure_cache()
    parts: dict[str, list[str]] = {"train": [], "train_extra": [], "eval": []}
    entries: dict[str, list[dict]] = {"sources": [], "train_only_sources": []}
    for source in SOURCES + EXTRA_SOURCES:
        archive = fetch(source, cache / "downloads")
        root = unpack(archive, cache / "extract" / source.name)
        docs = source.extract(root)
        train, evals = split_source(source.name, docs, source.train_only)
        entry = manifest_entry(source, docs)
        entry.update(train_chars=sum(map(len, train)), eval_chars=sum(map(len, evals)))
        entries["train_only_sources" if source.train_only else "sources"].append(entry)
        print(f"  {source.name:17s} {len(docs):4d} docs  train {entry['train_chars']:>10,d}"
              f"  eval {entry['eval_chars']:>9,d} chars", flush=True)
        parts["train_extra" if source.train_only else "train"] += train
        parts["eval"] += evals
    texts = {split: "".join(c + EOT for c in chunks_) for split, chunks_ in parts.items()}
    leaks = shared_stretches(texts["eval"], texts["train_extra"])
    if leaks:
        offset, length = max(leaks, key=lambda leak: leak[1])
        raise SystemExit(f"{len(leaks)} stretches of the eval slice occur in the train-only text, "
                         f"e.g. {texts['train_extra'][offset:offset + length][:200]!r}")
    for path, split in ((out_train, "train"), (out_extra, "train_extra"), (out_eval, "eval")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[split], encoding="utf-8")

    def summary(split: str) -> dict:
        return {"chunks": len(parts[split]), "bytes": len(texts[split].encode()),
                "sha256": sha256(texts[split])}

    return {"eot": EOT, "chunk_chars": CHUNK_CHARS, "eval_per_mille": EVAL_PER_MILLE,
            "sources": entries["sources"], "train_only_sources": entries["train_only_sources"],
            "train": summary("train"), "train_extra": summary("train_extra"),
            "eval": summary("eval"), "eval_leak_check": {"chars": LEAK_CHARS, "shared": 0}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if the rebuilt corpus differs from the committed manifest")
    args = parser.parse_args()
    manifest_path = HERE / "corpus_manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    new = build(HERE / "eval" / "eval.txt", CACHE / "corpus" / "train.txt",
                CACHE / "corpus" / "train_extra.txt")
    print(f"train {new['train']['bytes']:,d} bytes (+ {new['train_extra']['bytes']:,d} train-only),"
          f" eval {new['eval']['bytes']:,d} bytes")
    changed = [split for split in ("train", "train_extra", "eval")
               if old and split in old and old[split]["sha256"] != new[split]["sha256"]]
    if changed:
        message = f"the rebuilt corpus differs from the previous manifest: {', '.join(changed)}"
        if args.check:
            raise SystemExit(message)
        print("warning:", message)
    manifest_path.write_text(json.dumps(new, indent=2) + "\n")


if __name__ == "__main__":
    main()
