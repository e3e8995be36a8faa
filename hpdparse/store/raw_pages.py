"""Raw pages: a page of a document as its folder keeps it, `RawPage`: the model's text exactly
(raw/page-NNNN.txt) and its metadata record (raw/page-NNNN.json), which this module alone turns
into JSON and back. A selected page with no raw output is a `RawPage` too, a failed one.

The text is written first, then the metadata with the text's sha256: the metadata file is the
commit point, so a page is reusable only when both exist and agree. The JSON keys are those of
`RawPage.meta_json` in their order, then "sha256"; folders written by earlier versions read the
same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hpdparse.engines.base import FINISH_ERROR, DecodeKey, EngineInfo, PageResult, ReuseKey
from hpdparse.hpd.logprobs import PageLogprobs
from hpdparse.sources.document import PageGeometry
from hpdparse.store.atomic import json_bytes, sha256_text
from hpdparse.store.layout import raw_meta_name, raw_text_name

PAGE_OK = "ok"
PAGE_FAILED = "failed"
NO_GEOMETRY = PageGeometry(0, 0)  # a page with no raw output


@dataclass
class RawPage:
    """One page of a document after the engine, or read back from raw/: the engine's answer
    (`result`: the raw text, how decoding ended, tokens, seconds, statistics, log-probabilities),
    the rasterized page's geometry, what produced it (`info`) and the key that decides whether a
    later run may reuse it (`reuse`). The records are the ones made where the page was rasterized
    and decoded, held by reference. A failed page has a FINISH_ERROR result with its error, no
    geometry (0 x 0) and no `info` or `reuse`."""

    number: int  # 1-based page number in the source document
    result: PageResult
    geometry: PageGeometry = NO_GEOMETRY
    info: EngineInfo | None = None
    reuse: ReuseKey | None = None

    @classmethod
    def failed(cls, number: int, error: str) -> RawPage:
        return cls(number, PageResult(number, "", FINISH_ERROR, error=error))

    @property
    def text(self) -> str:
        """The raw HPD stream exactly; "" for a failed page."""
        return self.result.text

    @property
    def status(self) -> str:
        return PAGE_OK if self.result.ok else PAGE_FAILED

    @property
    def error(self) -> str | None:
        return self.result.error

    def reusable(self, key: ReuseKey) -> bool:
        """True when the page was made by the same model, revision, prompt and max tokens, from
        a page rasterized at the same requested dpi."""
        return self.reuse == key

    def meta_json(self) -> dict[str, Any]:
        """The metadata object (seconds to the ms); "logprobs" only when the page has them (a
        page without them is written as before they were recorded)."""
        info, reuse, geometry, result = self.info, self.reuse, self.geometry, self.result
        assert info is not None and reuse is not None, "a failed page has no raw record"
        data = {
            "page": self.number,
            "engine": info.engine,
            "model": info.model,
            "revision": info.revision,
            "prompt": info.prompt,
            "max_tokens": info.max_tokens,
            "reuse_key": reuse.decode.to_json(),
            "requested_dpi": reuse.requested_dpi,  # the run's --dpi: part of the reuse rule
            "dpi": geometry.dpi,
            "width_px": geometry.width_px,
            "height_px": geometry.height_px,
            "width_pt": geometry.width_pt,
            "height_pt": geometry.height_pt,
            "label": geometry.label,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens,
            "output_tokens": result.output_tokens,
            "seconds": round(result.seconds, 3),
            "stats": result.stats,
        }
        if result.logprobs is not None:
            data["logprobs"] = result.logprobs.to_json()
        return data

    @classmethod
    def from_json(cls, number: int, text: str, data: dict[str, Any]) -> RawPage:
        """The page of a metadata object and its text, tolerant of missing fields (earlier
        versions); raises TypeError or ValueError for values of the wrong type."""
        get = data.get
        result = PageResult(
            number,
            text,
            get("finish_reason"),
            prompt_tokens=int(get("prompt_tokens") or 0),
            output_tokens=int(get("output_tokens") or 0),
            seconds=float(get("seconds") or 0.0),
            stats=dict(get("stats") or {}),
            logprobs=PageLogprobs.from_json(get("logprobs")),
        )
        geometry = PageGeometry(
            width_px=int(get("width_px") or 0),
            height_px=int(get("height_px") or 0),
            dpi=get("dpi"),
            label=get("label"),
            width_pt=get("width_pt"),
            height_pt=get("height_pt"),
        )
        info = EngineInfo(
            get("engine"), get("model"), get("revision"), get("prompt"), get("max_tokens")
        )
        key = DecodeKey.from_json(get("reuse_key"))
        reuse = ReuseKey(key, get("requested_dpi")) if key is not None else None
        return cls(number, result, geometry, info, reuse)


def raw_page_files(page: RawPage) -> dict[str, bytes]:
    """A decoded page's raw files (name -> bytes): its text, then its metadata (the record, then
    the text's sha256), in the order they are written."""
    meta = page.meta_json()
    meta["sha256"] = sha256_text(page.text)
    text_name, meta_name = raw_text_name(page.number), raw_meta_name(page.number)
    return {text_name: page.text.encode("utf-8"), meta_name: json_bytes(meta)}


def decode_raw_page(number: int, text: bytes | None, meta: bytes | None) -> RawPage | None:
    """The page that a .txt and its .json make, or None when one is missing or they are not one
    (the metadata is not a valid record or does not carry the sha256 of the text)."""
    if text is None or meta is None:
        return None
    try:
        decoded, data = text.decode("utf-8"), json.loads(meta.decode("utf-8"))
        if not isinstance(data, dict) or data.get("sha256") != sha256_text(decoded):
            return None
        return RawPage.from_json(number, decoded, data)
    except (TypeError, ValueError):
        return None
