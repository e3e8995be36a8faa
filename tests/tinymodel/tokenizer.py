"""A small byte-level BPE tokenizer in the Qwen2 format, trained on the sample streams.

It holds every special token of the real HPD-Parsing tokenizer (their ids differ: never hard-code
ids; read them from config.json / the tokenizer). Files written: tokenizer.json,
tokenizer_config.json (tokenizer_class Qwen2Tokenizer, chat template), special_tokens_map.json,
added_tokens.json, vocab.json, merges.txt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)

from hpdparse.hpd import protocol as P

# Qwen2's pre-tokenizer split (digits one by one, words with their leading space).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# InternVL's usual system message (its `internvl2_5` conversation template).
INTERNVL_SYSTEM = (
    "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的"
    "多模态大语言模型。"
)

# Ordered as in the real vocabulary: Qwen's control tokens, InternVL's image tokens, then HPD's.
SPECIAL_TOKENS = (P.ENDOFTEXT, P.IM_START, P.IM_END, P.IMG_START, P.IMG_END, P.IMG_CONTEXT)
HPD_TOKENS = (P.BLOCK, P.FORK, P.CHILD)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + INTERNVL_SYSTEM + "<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Byte-level BPE over `texts` (plus the prompt texts), then the added tokens."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    prompts = [INTERNVL_SYSTEM, "system", "user", "assistant", P.PROMPT_FORK, P.PROMPT_PLAIN]
    # Split the training text at control tokens so BPE never merges across them.
    pieces: list[str] = []
    for text in list(texts) + prompts * 4:
        for part in text.replace(P.BLOCK, "\0").replace(P.CHILD, "\0").split("\0"):
            if part:
                pieces.append(part)
    tok.train_from_iterator(pieces, trainer=trainer)
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS + HPD_TOKENS]
    )
    return tok


def write_tokenizer_files(tok: Tokenizer, out_dir: Path, model_max_length: int) -> None:
    """The Hugging Face files of a Qwen2Tokenizer checkpoint."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    data = json.loads(tok.to_str())
    (out_dir / "vocab.json").write_text(
        json.dumps(data["model"]["vocab"], ensure_ascii=False), encoding="utf-8"
    )
    merges = data["model"]["merges"]
    lines = [m if isinstance(m, str) else " ".join(m) for m in merges]
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(lines) + "\n", "utf-8")
    added = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS + HPD_TOKENS}
    (out_dir / "added_tokens.json").write_text(json.dumps(added, indent=2) + "\n", "utf-8")
    decoder = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t, i in added.items()
    }
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": list(SPECIAL_TOKENS[1:] + HPD_TOKENS),
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": P.IM_END,
        "errors": "replace",
        "model_max_length": model_max_length,
        "pad_token": P.ENDOFTEXT,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", "utf-8"
    )
    special_map = {
        "additional_special_tokens": list(SPECIAL_TOKENS[1:] + HPD_TOKENS),
        "eos_token": {
            "content": P.IM_END,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
        },
        "pad_token": {
            "content": P.ENDOFTEXT,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
        },
    }
    (out_dir / "special_tokens_map.json").write_text(
        json.dumps(special_map, indent=2) + "\n", "utf-8"
    )
