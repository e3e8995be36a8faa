"""Prompt token ids in InternVL's chat format, and the tokenizer-level special token ids.

    <|im_start|>system\\n{system}<|im_end|>\\n<|im_start|>user\\n<img>{<IMG_CONTEXT> x N}</img>\\n
    {instruction}<|im_end|>\\n<|im_start|>assistant\\n

The system text comes from the checkpoint's chat template when it renders one; otherwise InternVL's
usual system message is used. Ids are always read from the tokenizer, never hard-coded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpdparse.errors import EngineError
from hpdparse.hpd import protocol as P

if TYPE_CHECKING:
    from hpdparse.hpd.model_config import HpdModelConfig

IMAGE_PLACEHOLDER = "<image>"
INTERNVL_SYSTEM = (
    "你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位联合开发的"
    "多模态大语言模型。"
)


@dataclass(frozen=True)
class TokenIds:
    """The protocol's token ids in one tokenizer."""

    img_start: int
    img_end: int
    img_context: int
    im_end: int
    fork: int
    child: int
    block: int
    endoftext: int | None

    @property
    def stop(self) -> frozenset[int]:
        ids = {self.im_end}
        if self.endoftext is not None:
            ids.add(self.endoftext)
        return frozenset(ids)


def load_tokenizer(path: Path, model_id: str) -> Any:
    """The checkpoint's tokenizer.json through the `tokenizers` library."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises a bare Exception on malformed files
        raise EngineError(f"model {model_id}: cannot read tokenizer.json: {exc}") from None


def token_ids(tokenizer: Any, config: HpdModelConfig, model_id: str) -> TokenIds:
    """Look up every protocol token; fork/child must agree with config.json."""

    def need(token: str) -> int:
        tid = tokenizer.token_to_id(token)
        if tid is None:
            raise EngineError(f"model {model_id}: tokenizer has no {token} token")
        return int(tid)

    ids = TokenIds(
        img_start=need(P.IMG_START),
        img_end=need(P.IMG_END),
        img_context=need(P.IMG_CONTEXT),
        im_end=need(P.IM_END),
        fork=need(P.FORK),
        child=need(P.CHILD),
        block=need(P.BLOCK),
        endoftext=tokenizer.token_to_id(P.ENDOFTEXT),
    )
    for key, tid, wanted in (
        ("fork_token_id", ids.fork, config.fork_token_id),
        ("child_token_id", ids.child, config.child_token_id),
    ):
        if wanted != tid:
            raise EngineError(
                f"model {model_id}: config.json {key} {wanted} is not the tokenizer's id {tid}"
            )
    return ids


def chat_text(chat_template: str | None, instruction: str) -> str:
    """The whole prompt as text with one `<image>` placeholder."""
    user = f"{IMAGE_PLACEHOLDER}\n{instruction}"
    if chat_template:
        try:
            import jinja2

            env = jinja2.Environment(undefined=jinja2.StrictUndefined)
            text = env.from_string(chat_template).render(
                messages=[{"role": "user", "content": user}],
                add_generation_prompt=True,
            )
            if IMAGE_PLACEHOLDER in text and f"{P.IM_START}system" in text:
                return text
        except Exception:  # an unusual template: fall back to InternVL's format below
            pass
    return (
        f"{P.IM_START}system\n{INTERNVL_SYSTEM}{P.IM_END}\n"
        f"{P.IM_START}user\n{user}{P.IM_END}\n{P.IM_START}assistant\n"
    )


class PromptBuilder:
    """Prompt ids for a page with N image tokens; the text around the image is encoded once."""

    def __init__(self, tokenizer: Any, ids: TokenIds, chat_template: str | None) -> None:
        self.ids = ids
        self._parts: dict[bool, tuple[list[int], list[int]]] = {}
        for fork in (True, False):
            text = chat_text(chat_template, P.instruction(fork))
            before, after = text.split(IMAGE_PLACEHOLDER, 1)
            enc_before = tokenizer.encode(before, add_special_tokens=False).ids
            enc_after = tokenizer.encode(after, add_special_tokens=False).ids
            self._parts[fork] = (list(enc_before), list(enc_after))

    def build(self, num_image_tokens: int, fork: bool) -> list[int]:
        before, after = self._parts[fork]
        image = [self.ids.img_start, *([self.ids.img_context] * num_image_tokens), self.ids.img_end]
        return before + image + after
