"""Build the course corpus: fetch the sources, extract plain text, split train/eval deterministically.

    python datasets/build_corpus.py

Downloads and extracted packages are cached under datasets/.cache/ (git-ignored). Outputs:
  datasets/.cache/corpus/train.txt   training text (not committed)
  datasets/eval/eval.txt             the held-out eval slice (committed, about 1 MB)
  datasets/corpus_manifest.json      per-source sizes and the SHA-256 of both splits (committed)

Both splits are sequences of chunks (a few KB of consecutive paragraphs of one document), each
followed by the end-of-text marker. A chunk goes to eval when the SHA-1 of its key
"source/document/index" falls in the lowest EVAL_PER_MILLE of the hash range: the split depends
only on the text, never on a random state or on file-system order.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import unicodedata
from pathlib import Path

from corpus_sources import SOURCES, Documents, fetch, manifest_entry, unpack

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
EOT = "<|endoftext|>"
CHUNK_CHARS = 3000  # a chunk closes once it holds at least this many characters
EVAL_PER_MILLE = 40  # about 4% of chunks, about 1 MB of text


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


def split_source(name: str, docs: Documents) -> tuple[list[str], list[str]]:
    train, evals = [], []
    for doc_id, text in docs:
        for k, chunk in enumerate(chunks(normalise(text))):
            (evals if is_eval(f"{name}/{doc_id}/{k}") else train).append(chunk)
    return train, evals


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build(out_eval: Path, out_train: Path) -> dict:
    cache = ensure_cache()
    train_all, eval_all, entries = [], [], []
    for source in SOURCES:
        archive = fetch(source, cache / "downloads")
        root = unpack(archive, cache / "extract" / source.name)
        docs = source.extract(root)
        train, evals = split_source(source.name, docs)
        entry = manifest_entry(source, docs)
        entry.update(train_chars=sum(map(len, train)), eval_chars=sum(map(len, evals)))
        entries.append(entry)
        print(f"  {source.name:12s} {len(docs):4d} docs  train {entry['train_chars']:>10,d}"
              f"  eval {entry['eval_chars']:>9,d} chars", flush=True)
        train_all += train
        eval_all += evals
    train_text = "".join(c + EOT for c in train_all)
    eval_text = "".join(c + EOT for c in eval_all)
    out_train.parent.mkdir(parents=True, exist_ok=True)
    out_eval.parent.mkdir(parents=True, exist_ok=True)
    out_train.write_text(train_text, encoding="utf-8")
    out_eval.write_text(eval_text, encoding="utf-8")
    manifest = {"eot": EOT, "chunk_chars": CHUNK_CHARS, "eval_per_mille": EVAL_PER_MILLE,
                "sources": entries,
                "train": {"chunks": len(train_all), "bytes": len(train_text.encode()),
                          "sha256": sha256(train_text)},
                "eval": {"chunks": len(eval_all), "bytes": len(eval_text.encode()),
                         "sha256": sha256(eval_text)}}
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="fail if the rebuilt eval slice differs from the committed manifest")
    args = parser.parse_args()
    manifest_path = HERE / "corpus_manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    new = build(HERE / "eval" / "eval.txt", CACHE / "corpus" / "train.txt")
    print(f"train {new['train']['bytes']:,d} bytes, eval {new['eval']['bytes']:,d} bytes")
    if old and (old["train"]["sha256"], old["eval"]["sha256"]) != (
            new["train"]["sha256"], new["eval"]["sha256"]):
        message = "the rebuilt corpus differs from the previous manifest"
        if args.check:
            raise SystemExit(message)
        print("warning:", message)
    manifest_path.write_text(json.dumps(new, indent=2) + "\n")


if __name__ == "__main__":
    main()
