"""Raw pages: the model's text of one page (raw/page-NNNN.txt) and its metadata record
(raw/page-NNNN.json), `RawPageMeta`, which this module alone turns into JSON and back.

The text is written first, then the metadata with the text's sha256: the metadata file is the
commit point, so a page is reusable only when both exist and agree. The JSON keys are the fields
of `RawPageMeta` in their order, then "sha256"; folders written by earlier versions read the same.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from hpdparse.hpd.logprobs import PageLogprobs
from hpdparse.store.atomic import sha256_text


@dataclass(frozen=True)
class RawPageMeta:
    """What produced a raw page and how: the engine's identity (its reuse key decides whether a
    later run may reuse the page), the rasterized page's geometry, how decoding ended."""

    page: int
    engine: str
    model: str
    revision: str | None
    prompt: str
    max_tokens: int
    reuse_key: dict[str, Any]
    requested_dpi: int  # the run's --dpi: part of the reuse rule
    dpi: int | None  # the dpi the page was rasterized at (lower for huge pages; None: an image)
    width_px: int
    height_px: int
    width_pt: float | None
    height_pt: float | None
    label: str | None  # the page label (/PageLabels), if any
    finish_reason: str | None  # FINISH_STOP or FINISH_LENGTH (engines.base)
    prompt_tokens: int
    output_tokens: int
    seconds: float
    stats: dict[str, int | float]
    # The chosen tokens' log-probabilities (compact, see hpd/logprobs.py); None for pages saved
    # before they were recorded, or from an engine or server that gave none.
    logprobs: PageLogprobs | None = None

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["logprobs"] = self.logprobs.to_json() if self.logprobs is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RawPageMeta:
        """The record of a metadata file, tolerant of missing fields (earlier versions); raises
        TypeError or ValueError for values of the wrong type."""
        return cls(
            page=data.get("page"),
            engine=data.get("engine"),
            model=data.get("model"),
            revision=data.get("revision"),
            prompt=data.get("prompt"),
            max_tokens=data.get("max_tokens"),
            reuse_key=data.get("reuse_key"),
            requested_dpi=data.get("requested_dpi"),
            dpi=data.get("dpi"),
            width_px=int(data.get("width_px") or 0),
            height_px=int(data.get("height_px") or 0),
            width_pt=data.get("width_pt"),
            height_pt=data.get("height_pt"),
            label=data.get("label"),
            finish_reason=data.get("finish_reason"),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            seconds=float(data.get("seconds") or 0.0),
            stats=dict(data.get("stats") or {}),
            logprobs=PageLogprobs.from_json(data.get("logprobs")),
        )


@dataclass(frozen=True)
class RawPage:
    """One decoded page as saved: its number, the raw model text exactly, its metadata."""

    number: int
    text: str
    meta: RawPageMeta

    def reusable(self, reuse_key: dict[str, Any], requested_dpi: int) -> bool:
        """True when the page was made by the same model, revision, prompt and max tokens, from
        a page rasterized at the same requested dpi."""
        return self.meta.reuse_key == reuse_key and self.meta.requested_dpi == requested_dpi


def encode_raw_page(page: RawPage) -> tuple[bytes, dict[str, Any]]:
    """The bytes of the .txt and the object of the .json (the record, then the text's sha256)."""
    meta = page.meta.to_json()
    meta["sha256"] = sha256_text(page.text)
    return page.text.encode("utf-8"), meta


def decode_raw_page(number: int, text: str, meta: Any) -> RawPage | None:
    """The page that a .json object and its .txt make, or None when they are not one (the
    metadata is not a valid record or does not carry the sha256 of the text)."""
    if not isinstance(meta, dict) or meta.get("sha256") != sha256_text(text):
        return None
    try:
        return RawPage(number, text, RawPageMeta.from_json(meta))
    except (TypeError, ValueError):
        return None
