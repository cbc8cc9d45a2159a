"""Train the course's byte-level BPE tokenizer and tokenize both corpus splits.

    python datasets/train_tokenizer.py

Reads datasets/.cache/corpus/{train,train_extra}.txt (from build_corpus.py) and
datasets/eval/eval.txt. The BPE is trained on train.txt alone (the five sources that also make
the eval slice), so the train-only sources change the token stream but not the tokenizer. Writes
  datasets/tokenizer/               tokenizer.json + tokenizer_config.json (committed)
  datasets/.cache/tokens/train.npy  uint16 token ids of train.txt, then train_extra.txt (not
                                    committed)
  datasets/.cache/tokens/eval.npy   uint16 token ids of the eval slice (not committed)

Byte-level BPE round-trips any string exactly (no normalizer, no unknown token). Id 0 is
<|endoftext|> (document separator, also used as BOS/EOS), id 1 is <|pad|>.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
EOT, PAD = "<|endoftext|>", "<|pad|>"
VOCAB_SIZE = 8192
CONTEXT = 1024


def train_bpe(train_text: str, vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=[EOT, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    docs = (d for d in train_text.split(EOT) if d)
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def save_hf(tok: Tokenizer, out: Path) -> None:
    """Save as a PreTrainedTokenizerFast folder that AutoTokenizer loads offline."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=EOT, eos_token=EOT, pad_token=PAD,
        model_max_length=CONTEXT, clean_up_tokenization_spaces=False)
    fast.save_pretrained(str(out))
    tok.save(str(out / "tokenizer.json"), pretty=False)  # compact: less than half the bytes
    # transformers 4 and 5 both resolve this class name (5 aliases it to its tokenizers backend).
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def encode(tok: Tokenizer, text: str) -> np.ndarray:
    """Token ids of `text`, documents separated by the EOT id. Encoded per document (faster,
    same result: EOT is a special token that the pre-tokenizer never merges across)."""
    eot_id = tok.token_to_id(EOT)
    docs = text.split(EOT)
    if docs and docs[-1] == "":
        docs = docs[:-1]
    ids: list[int] = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot_id)
    return np.asarray(ids, dtype=np.uint16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = parser.parse_args()
    if args.vocab_size > 65536:
        raise ValueError("token ids are stored as uint16: vocab_size must be <= 65536")
    texts = {name: (CACHE / "corpus" / f"{name}.txt").read_text(encoding="utf-8")
             for name in ("train", "train_extra")}
    texts["eval"] = (HERE / "eval" / "eval.txt").read_text(encoding="utf-8")
    tok = train_bpe(texts["train"], args.vocab_size)
    save_hf(tok, HERE / "tokenizer")
    ids = {name: encode(tok, text) for name, text in texts.items()}
    for name, text in texts.items():
        print(f"{name}: {len(text.encode()):,d} bytes -> {len(ids[name]):,d} tokens "
              f"({len(text.encode()) / len(ids[name]):.2f} bytes/token)")
    tokens = CACHE / "tokens"
    tokens.mkdir(parents=True, exist_ok=True)
    train_ids = np.concatenate([ids["train"], ids["train_extra"]])
    np.save(tokens / "train.npy", train_ids)
    np.save(tokens / "eval.npy", ids["eval"])
    print(f"train.npy: {len(train_ids):,d} tokens, eval.npy: {len(ids['eval']):,d} tokens")


if __name__ == "__main__":
    main()
