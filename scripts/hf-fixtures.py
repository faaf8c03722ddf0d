#!/usr/bin/env python3
"""Test fixtures built with the Hugging Face libraries, offline.

Subcommands:
  tokenizers OUTDIR   small byte-level BPE tokenizers in the style of GPT-2,
                      LLaMA-3 and Qwen2 (and split-*: the Split options those
                      do not use), trained here on a built-in corpus, each
                      under OUTDIR/<name>/: tokenizer.json,
                      tokenizer_config.json and golden.json (the test strings
                      with the library's ids and decodings, for
                      test/unit/BpeTokenizerTest.cpp).

  models OUTDIR       tiny random-weight LLaMA-2, LLaMA-3 (rope scaling,
                      sharded), Mistral (bf16 file) and Qwen2 (q/k/v biases,
                      tied embeddings) checkpoints, built with transformers'
                      from_config and save_pretrained, each with golden.safetensors:
                      token ids and transformers' fp32 logits on them.
  check-export EXPORTS OUTDIR
                      loads each checkpoint rlhfc exported under EXPORTS/<name>
                      with transformers and compares its logits to OUTDIR's
                      golden ones.
  dataset JSONL FIELDS VOCAB OUTDIR
                      a LLaMA-3-style tokenizer trained on the fields (comma-
                      separated) of a JSONL dataset, with bos, eos and pad
                      special tokens, for programs in test/E2E to use.

Nothing is downloaded. The output is the same on every run, so tests can
generate it at test time. It needs tokenizers==0.22.1
(scripts/requirements.txt): the golden ids are that version's.
Usage:
  python3 scripts/hf-fixtures.py tokenizers /tmp/bpe-fixtures
"""
import argparse
import json
import os
import random
import sys
import unicodedata

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, processors, trainers)

from hf_models import check_exports, write_models  # scripts/hf_models.py

# The pre-tokenizer regexes of the real tokenizer.json files.
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                r"\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
               r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Training text: English, code, numbers, whitespace runs and a little of
# other scripts, so that merges cover words, digits, indentation and
# multi-byte characters.
CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog doesn't care; "
    "it's sleeping. They're tired, we've seen it, I'm sure you'll agree "
    "and he'd say the same.",
    "Reinforcement learning from human feedback trains a policy against a "
    "reward model. The reward model scores each response; the policy is "
    "updated with PPO or GRPO, and a reference model keeps it close to "
    "where it started.",
    "In 2024, the cluster had 1024 GPUs, 128 nodes and 3.2 TB/s of "
    "bandwidth. Training took 36 hours, costing $12,345.67 (about 0.5% of "
    "the budget). Version 1.2.3 shipped on 2024-05-17 at 10:30:00.",
    "def tokenize(text, add_bos=True):\n"
    "    ids = []\n"
    "    for piece in split(text):\n"
    "        ids.extend(encode(piece))\n"
    "    return [BOS] + ids if add_bos else ids\n",
    "class Trainer:\n"
    "    def __init__(self, model, lr=1e-5):\n"
    "        self.model = model\n"
    "        self.lr = lr\n"
    "\n"
    "    def step(self, batch):\n"
    "        loss = self.model(batch).mean()\n"
    "        loss.backward()\n"
    "        return loss.item()\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\nreturn sum;\n",
    "{\"prompt\": \"What is 2 + 2?\", \"answer\": \"4\"}\n"
    "{\"prompt\": \"Name a prime number.\", \"answer\": \"7\"}",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000 10000 123456789 "
    "3.14159 2.71828 1,000,000 42 007 99.9%",
    "Whitespace:   three spaces,\ttab,\t\ttwo tabs,\n\nblank line,\r\n"
    "windows line, trailing spaces   \n    indented line\n",
    "Unicode: café naïve résumé façade coöperate Ångström über straße "
    "Ελληνικά русский язык",
    "中文文本测试。我们正在训练一个分词器。日本語のテキストです。한국어 문장입니다.",
    "Emoji: 😀 😂 👍 🎉 ❤️ 🚀 and arrows → ← ↑ ↓, math ∑ ∫ √ ≈ ≠ ≤ ≥.",
    "مرحبا بالعالم. שלום עולם. नमस्ते दुनिया.",
    "SHOUTING IS RUDE. DON'T DO IT. IT'S LOUD. WE'RE QUIET. I'LL STOP.",
    "Questions? Answers! Quotes: \"double\" and 'single'. Dashes - -- ---. "
    "Ellipsis... Parentheses (like this) [and this] {and this}.",
    "the the the the of of of and and and to to in in is is that that "
    "for for with with as as on on be be by by this this are are",
    # Latin-1 symbols share the lead byte C2 with U+0085 (NEL), a space to
    # the library's regexes.
    "Latin-1: 20\u00b0C \u00b1 2, \u00a7 3, \u00a9 2024 \u00ae, "
    "\u00abquoted\u00bb, x\u00a0y, a\u0085b \u0085\u0085c \u0085 d.",
]


def corpus():
    # Repeat so that the counts of common pairs clearly lead.
    return CORPUS * 4


# Strings every tokenizer is checked on: the awkward cases of each stage.
COMMON = [
    "",
    "Hello, world!",
    "hello",
    " hello",
    "The quick brown fox jumps over the lazy dog.",
    "DON'T stop. I'm here, you're there, we've, they'll, she'd, IT'S, "
    "We'Re, Y'ALL'D",
    "don't'''s's 's 'S '' ''' x'",
    "  two leading spaces",
    "trailing spaces   ",
    "a  b   c    d     e",
    "tabs\tand\nnewlines\r\n\r\nend\n\n\n",
    "\t\t  \n  x\n \n\t",
    "   ",
    "\n",
    " \n ",
    "12345678901234567890",
    "1 12 123 1234 12345 123456 1234567",
    "3.14159, 1,000,000 and 2024-01-15T10:30:00Z, x1y22z333",
    "中文字符测试，日本語のテキスト、한국어 문장",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 ❤️",
    "precomposed é à ñ ü vs combining e\u0301 a\u0300 n\u0303 u\u0308",
    "Å vs A\u030a, ﬁ ligature, Ⅻ, ①, ½, ²",
    "RTL: مرحبا بالعالم שלום עולם",
    "def f(x):\n    return x**2 + 1  # comment\n\n\nprint(f(3))\n",
    "if (a && b || !c) { return -1; } else { y = a->b[0]; }",
    "odd spaces: a\u00a0b\u3000c\u2028d\u0085e\u200bf\u2003g",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!!!!!!!!????....,,,,;;;;",
    "supercalifragilisticexpialidocious-antidisestablishmentarianism",
    "MiXeD CaSe WoRdS aNd CamelCaseIdentifiers_with_snake_case",
    "ÀÉÎÕÜ ąęłńśźż ΑΒΓΔ абвгд",
    "<|not a special token|> <| and |>",
    "x \u0085y \u0085\u0085 z\u0085 \u00a0\u00a0w \u00b0\u0085\u00b1",
    "mongolian vowel separator: a\u180eb \u180e\u180e c\u180e",
    "long s and kelvin: it'\u017f, IT'\u017f, '\u212a, x'\u212aB",
]

# Random strings from pieces that stress each stage: mixed scripts,
# whitespace kinds, contractions, digits and (partial) special tokens.
PIECES = (list("abcXYZ019 '\t\n\r.,!?-_\"") + [
    "'s", "'S", "'\u017f", "'LL", "'Re", "\u212a", "\u0085", "\u180e",
    "\u00a0", "\u3000", "\u2028", "\u200b", "\u200d", "\u4e2d", "\u6587",
    "\U0001F600", "\U0001F44D\U0001F3FD", "e\u0301", "\u0301", "\u0308",
    "\u00c5", "A\u030a", "\ufb01", "\u0663", "\u00bd", "\u00b2", "\u00df",
    "\u0130", "\u01c5", "\U0001F980", "\x00", "\x7f", "\x0b", "\x0c",
    "\x1f", "<|", "|>", "  ", "   ", "\n\n", "\r\n", " \n", "hello",
    " the", "123", "4567"])


def generated(specials, n=200, seed=1234):
    """`n` strings of PIECES and `specials`, the same ones on every run."""
    rng = random.Random(seed)
    pool = PIECES + specials
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 24)))
            for _ in range(n)]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, indent=1, sort_keys=True)
        f.write("\n")


def train(pre_tokenizer, vocab_size, ignore_merges=False, normalizer=None):
    """Learns merges within `pre_tokenizer`'s words and, interleaved with
    them, merges learned on whole lines: with merges across its word
    boundaries, a boundary misplaced changes the ids, which merges learned
    within the words alone would often hide."""
    def learn(pre, size):
        tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
        if normalizer is not None:
            tok.normalizer = normalizer
        tok.pre_tokenizer = pre
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=size, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(corpus(), trainer)
        return tok

    tok = learn(pre_tokenizer, vocab_size)
    lines = json.loads(learn(pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=False), 256 + vocab_size // 4)
        .to_str())["model"]
    data = json.loads(tok.to_str())
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    for token in sorted(lines["vocab"], key=lines["vocab"].get):
        vocab.setdefault(token, len(vocab))
    mixed, seen = [], set()
    for i in range(max(len(merges), len(lines["merges"]))):
        for m in (merges[i:i + 1] + lines["merges"][i:i + 1]):
            if tuple(m) not in seen:
                seen.add(tuple(m))
                mixed.append(m)
    data["model"]["merges"] = mixed
    return Tokenizer.from_str(json.dumps(data))


def add_whole_words(tok, words):
    """Adds vocabulary entries no merge produces, as LLaMA-3's converted
    tiktoken vocabulary has: only ignore_merges finds them whole."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for w in words:
        vocab.setdefault(w, len(vocab))
    return Tokenizer.from_str(json.dumps(data))


def write_legacy_merges(path):
    """Rewrites the merges as "a b" strings, as older files (GPT-2's) have
    them; the library saves [a, b] pairs."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=2)


def gpt2():
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), 700)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.add_special_tokens([
        "<|endoftext|>",
        # RoBERTa's mask: swallows the spaces around it.
        AddedToken("<mask>", special=True, lstrip=True, rstrip=True,
                   normalized=False),
    ])
    # Non-special added tokens: one matched only as a whole word, two that
    # overlap (the longer wins).
    tok.add_tokens([AddedToken("<word>", single_word=True),
                    AddedToken("Hello"), AddedToken("Hello world")])
    config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
              "unk_token": "<|endoftext|>",
              "tokenizer_class": "GPT2Tokenizer"}
    extra = [
        "<|endoftext|>",
        "one<|endoftext|>two<|endoftext|><|endoftext|> three",
        "fill the <mask> in, <mask>x, a<mask>b and   <mask>   spaced",
        "<word> alone, <word>s glued, a<word> glued, (<word>) punctuated",
        "<|endoftext|<|endoftext|>|>",
        "Hello world, Hello  world, Hello worlds, xHello world",
    ]
    return dict(tok=tok, config=config, legacy=True,
                texts=COMMON + extra + generated(["<|endoftext|>", "<mask>",
                                                  "<word>", " <mask> "]))


def gpt2_prefix():
    """GPT-2's pre-tokenizer with add_prefix_space, as RoBERTa's."""
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=True), 600)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.add_special_tokens(["<|endoftext|>"])
    config = {"eos_token": {"__type": "AddedToken", "content": "<|endoftext|>",
                            "lstrip": False, "rstrip": False,
                            "normalized": True, "single_word": False}}
    extra = ["x<|endoftext|>y <|endoftext|> z", "<|endoftext|>hello"]
    return dict(tok=tok, config=config, exact=False,
                texts=COMMON + extra + generated(["<|endoftext|>"]))


LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>",
                  "<|reserved_special_token_0|>", "<|start_header_id|>",
                  "<|end_header_id|>", "<|eot_id|>"]


def split_then_bytes(regex, trim_offsets):
    """LLaMA-3's and Qwen2's pre-tokenizer: the regex split, then bytes."""
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False,
                                 trim_offsets=trim_offsets, use_regex=False),
    ])


def llama3():
    pre = split_then_bytes(LLAMA3_REGEX, trim_offsets=True)
    tok = train(pre, 1000, ignore_merges=True)
    tok = add_whole_words(tok, ["Ġsupercalifragilisticexpialidocious",
                                "Ġreinforcement", "Ġtokenization", "ĠHello"])
    tok.add_special_tokens(LLAMA3_SPECIAL)
    bos = "<|begin_of_text|>"
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False,
                             use_regex=True),
        processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
            special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
    # The instruct model's eos.
    config = {"bos_token": bos, "eos_token": "<|eot_id|>",
              "tokenizer_class": "PreTrainedTokenizerFast"}
    extra = [
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
        "Hi there!<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
        "\n\n",
        "text<|eot_id|>more <|end_of_text|> end",
        "<|eot_id",
        " Hello Hello supercalifragilisticexpialidocious reinforcement "
        "tokenization tokenizations",
    ]
    return dict(tok=tok, config=config,
                texts=COMMON + extra + generated(LLAMA3_SPECIAL))


QWEN2_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def qwen2():
    pre = split_then_bytes(QWEN2_REGEX, trim_offsets=False)
    tok = train(pre, 800, normalizer=normalizers.NFC())
    tok.add_special_tokens(QWEN2_SPECIAL)
    tok.post_processor = processors.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=False)
    config = {"bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>",
              "tokenizer_class": "Qwen2Tokenizer"}
    extra = [
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n"
        "caf\u00e9 vs cafe\u0301<|im_end|>\n<|im_start|>assistant\n",
        # Normalization stops at added tokens: each side is its own piece.
        "e<|im_end|>\u0301 and \u0301<|endoftext|>",
        "\u1e9b\u0323 \u212b \u2126 \ufb01",
    ]
    return dict(tok=tok, config=config,
                texts=COMMON + extra + generated(QWEN2_SPECIAL))


# The Split options the three models do not use, one tokenizer each, so
# that a later step cannot hide a mistake in an earlier one. Some also lack
# a few byte characters, which BPE then drops or encodes as unk.
SPLITS = {
    "split-string": dict(pre=lambda: pre_tokenizers.Split(
        " ", behavior="merged_with_next")),
    "split-invert": dict(pre=lambda: pre_tokenizers.Split(
        Regex(r"\p{L}+"), behavior="merged_with_previous", invert=True),
        drop=True),
    # Oniguruma's \h is a hex digit.
    "split-contiguous": dict(pre=lambda: pre_tokenizers.Split(
        Regex(r"\h"), behavior="contiguous"), extra=["\u2211x"]),
    # A string pattern is matched as it is: "." is no wildcard.
    "split-removed": dict(pre=lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Split(".", behavior="removed"),
        pre_tokenizers.Split(Regex(r"\S+"), behavior="removed", invert=True),
    ]), drop=True, unk="<unk>"),
    # Ruby's ^ starts every line; empty matches before y and \u00e9.
    "split-empty": dict(pre=lambda: pre_tokenizers.Split(
        Regex("^ +|(?=[yY\u00e9])|x+"), behavior="isolated"),
        drop=True, unk="<unk>", fuse_unk=True),
}


def byte_chars():
    """GPT-2's bytes_to_unicode: the character standing for each byte."""
    printable = (list(range(ord("!"), ord("~") + 1)) +
                 list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100)))
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable}
    chars.update({b: chr(256 + n) for n, b in enumerate(others)})
    return chars


def edit_vocab(tok, drop=False, unk=None, fuse_unk=False, extra=()):
    """Takes bytes 0x80-0x83 out of the vocabulary (and the merges that
    make them), sets an unk token, adds tokens that are not byte
    characters; ids stay dense."""
    data = json.loads(tok.to_str())
    model = data["model"]
    gone = {byte_chars()[b] for b in range(0x80, 0x84)} if drop else set()
    tokens = [t for t in sorted(model["vocab"], key=model["vocab"].get)
              if t not in gone] + list(extra) + ([unk] if unk else [])
    model["vocab"] = {t: i for i, t in enumerate(tokens)}
    model["merges"] = [m for m in model["merges"]
                       if m[0] not in gone and m[1] not in gone]
    model["unk_token"] = unk
    model["fuse_unk"] = fuse_unk
    return Tokenizer.from_str(json.dumps(data))


def split(name):
    spec = SPLITS[name]
    pre = pre_tokenizers.Sequence([
        spec["pre"](),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = edit_vocab(train(pre, 400), spec.get("drop", False),
                     spec.get("unk"), spec.get("fuse_unk", False),
                     spec.get("extra", ()))
    tok.add_special_tokens(["<|endoftext|>"])
    return dict(tok=tok, config={"eos_token": "<|endoftext|>"}, exact=False,
                texts=COMMON + generated(["<|endoftext|>"], n=100))


TOKENIZERS = {"gpt2": gpt2, "gpt2-prefix": gpt2_prefix, "llama3": llama3,
              "qwen2": qwen2}
TOKENIZERS.update({name: lambda name=name: split(name) for name in SPLITS})


def golden(tok, texts, normalizer, exact):
    stripping = [t.content for t in tok.get_added_tokens_decoder().values()
                 if t.lstrip or t.rstrip]
    cases = []
    for text in texts:
        plain = tok.encode(text, add_special_tokens=False).ids
        special = tok.encode(text, add_special_tokens=True).ids
        decoded = tok.decode(plain, skip_special_tokens=False)
        # Decoding gives the text back, normalized, unless a prefix space
        # was added or an added token swallowed the spaces around it.
        lossless = exact and not any(s in text for s in stripping)
        expected = unicodedata.normalize("NFC", text) if normalizer else text
        if lossless and decoded != expected:
            sys.exit(f"hf-fixtures: decode does not round-trip {text!r}: "
                     f"{decoded!r}")
        roundtrip = lossless and expected == text
        cases.append({"text": text, "ids": plain, "ids_with_special": special,
                      "decoded": decoded, "roundtrip": roundtrip})
    return cases


def decode_each(tok, size):
    """Every token decoded on its own, where that gives whole characters
    (the library replaces a split one with U+FFFD)."""
    out = []
    for i in range(size):
        if tok.id_to_token(i) is not None:
            text = tok.decode([i], skip_special_tokens=False)
            if "\ufffd" not in text:
                out.append({"id": i, "text": text})
    return out


def check_ignore_merges(tok, texts):
    """Fails unless ignore_merges changes some golden encoding, so the
    fixture keeps testing it."""
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = False
    plain = Tokenizer.from_str(json.dumps(data))
    if all(tok.encode(t).ids == plain.encode(t).ids for t in texts):
        sys.exit("hf-fixtures: llama3's ignore_merges changes no test string")


def write_tokenizers(outdir):
    for name, build in TOKENIZERS.items():
        b = build()
        texts, exact = b["texts"], b.get("exact", True)
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        b["tok"].save(path)
        if b.get("legacy"):
            write_legacy_merges(path)
        # Golden ids from the file as saved, as a user would load it.
        tok = Tokenizer.from_file(path)
        if name == "llama3":
            check_ignore_merges(tok, texts)
        normalizer = json.loads(tok.to_str())["normalizer"]
        write_json(os.path.join(d, "tokenizer_config.json"), b["config"])
        size = max(tok.get_vocab(with_added_tokens=True).values()) + 1
        write_json(os.path.join(d, "golden.json"), {
            "tokenizer": name, "normalizer": normalizer, "vocab_size": size,
            "cases": golden(tok, texts, normalizer, exact),
            "decode": decode_each(tok, size)})
        print(f"{name}: {len(texts)} strings in {d}")


def write_dataset_tokenizer(jsonl, fields, vocab, outdir):
    texts = []
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                texts += [str(row[k]) for k in fields.split(",")]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = split_then_bytes(LLAMA3_REGEX, trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab, show_progress=False, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos = specials[0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos}:0 $A:0", special_tokens=[(bos, tok.token_to_id(bos))])
    os.makedirs(outdir, exist_ok=True)
    tok.save(os.path.join(outdir, "tokenizer.json"))
    write_json(os.path.join(outdir, "tokenizer_config.json"),
               {"bos_token": bos, "eos_token": specials[1],
                "pad_token": specials[2]})
    print(f"dataset tokenizer: {tok.get_vocab_size()} ids in {outdir}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tokenizers", help="byte-level BPE tokenizers")
    t.add_argument("outdir")
    m = sub.add_parser("models", help="tiny transformers checkpoints")
    m.add_argument("outdir")
    c = sub.add_parser("check-export", help="exports load in transformers")
    c.add_argument("exports")
    c.add_argument("outdir")
    d = sub.add_parser("dataset", help="a tokenizer trained on a dataset")
    d.add_argument("jsonl")
    d.add_argument("fields")
    d.add_argument("vocab", type=int)
    d.add_argument("outdir")
    args = ap.parse_args()
    if args.command == "tokenizers":
        write_tokenizers(args.outdir)
    elif args.command == "models":
        write_models(args.outdir)
    elif args.command == "check-export":
        check_exports(args.exports, args.outdir)
    else:
        write_dataset_tokenizer(args.jsonl, args.fields, args.vocab,
                                args.outdir)


if __name__ == "__main__":
    main()
