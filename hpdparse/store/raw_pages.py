"""Raw pages: the model's text of one page (raw/page-NNNN.txt) and its metadata record
(raw/page-NNNN.json), `RawPageMeta`, which this module alone turns into JSON and back.

The text is written first, then the metadata with the text's sha256: the metadata file is the
commit point, so a page is reusable only when both exist and agree. The JSON keys are those of
`RawPageMeta.to_json` in their order, then "sha256"; folders written by earlier versions read the
same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpdparse.engines.base import DecodeRecord, EngineInfo, ReuseKey
from hpdparse.hpd.logprobs import PageLogprobs
from hpdparse.sources.document import PageGeometry
from hpdparse.store.atomic import sha256_text


@dataclass(frozen=True)
class RawPageMeta:
    """What produced a raw page and how: the engine's identity, the key that decides whether a
    later run may reuse the page, the rasterized page's geometry, how decoding ended. The records
    are the ones made where the page was rasterized and decoded, held by reference."""

    page: int
    info: EngineInfo
    reuse: ReuseKey
    geometry: PageGeometry
    decode: DecodeRecord

    def to_json(self) -> dict[str, Any]:
        """The metadata object; "logprobs" only when the page has them (a page without them is
        written as before they were recorded)."""
        info, geometry, decode = self.info, self.geometry, self.decode
        data = {
            "page": self.page,
            "engine": info.engine,
            "model": info.model,
            "revision": info.revision,
            "prompt": info.prompt,
            "max_tokens": info.max_tokens,
            "reuse_key": self.reuse.engine,
            "requested_dpi": self.reuse.requested_dpi,  # the run's --dpi: part of the reuse rule
            "dpi": geometry.dpi,
            "width_px": geometry.width_px,
            "height_px": geometry.height_px,
            "width_pt": geometry.width_pt,
            "height_pt": geometry.height_pt,
            "label": geometry.label,
            "finish_reason": decode.finish_reason,
            "prompt_tokens": decode.prompt_tokens,
            "output_tokens": decode.output_tokens,
            "seconds": decode.seconds,
            "stats": decode.stats,
        }
        if decode.logprobs is not None:
            data["logprobs"] = decode.logprobs.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RawPageMeta:
        """The record of a metadata file, tolerant of missing fields (earlier versions); raises
        TypeError or ValueError for values of the wrong type."""
        get = data.get
        return cls(
            page=get("page"),
            info=EngineInfo(
                get("engine"), get("model"), get("revision"), get("prompt"), get("max_tokens")
            ),
            reuse=ReuseKey(get("reuse_key"), get("requested_dpi")),
            geometry=PageGeometry(
                width_px=int(get("width_px") or 0),
                height_px=int(get("height_px") or 0),
                dpi=get("dpi"),
                label=get("label"),
                width_pt=get("width_pt"),
                height_pt=get("height_pt"),
            ),
            decode=DecodeRecord(
                finish_reason=get("finish_reason"),
                prompt_tokens=int(get("prompt_tokens") or 0),
                output_tokens=int(get("output_tokens") or 0),
                seconds=float(get("seconds") or 0.0),
                stats=dict(get("stats") or {}),
                logprobs=PageLogprobs.from_json(get("logprobs")),
            ),
        )


@dataclass(frozen=True)
class RawPage:
    """One decoded page as saved: its number, the raw model text exactly, its metadata."""

    number: int
    text: str
    meta: RawPageMeta

    def reusable(self, key: ReuseKey) -> bool:
        """True when the page was made by the same model, revision, prompt and max tokens, from
        a page rasterized at the same requested dpi."""
        return self.meta.reuse == key


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
