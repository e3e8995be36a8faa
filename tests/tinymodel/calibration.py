"""A calibration set for block confidence: pages whose ground truth is exact per block, rendered
clean and degraded until the model makes real mistakes. Two kinds of pages: the tiny model's
sample pages (tests/fixtures/tiny-hpd recites them), and random reading pages
(tests/tinymodel/reading.py; keys from `reading_keys`, levels `READING_LEVELS`), which
tests/fixtures/tiny-hpd-reader was trained to read.

Degradation levels (`LEVELS`) combine a lower resolution, Gaussian blur, Gaussian noise and JPEG
artefacts on the page image rendered at 200 dpi, or crop the page (its bottom part cut off); each
page is decoded once per level and seed through a real engine (`decode`). Every block with
content that the model wrote is compared with the page's ground-truth blocks (`block_outcomes`):
it is right when its text equals a ground-truth block's exactly; its character error rate is the
edit distance to the nearest ground-truth block's text over that text's length. On a cropped
page the ground truth is the blocks inside what is left: a block the model wrote from a region
cut away (it can only have remembered it) is wrong, and one matching a block the crop cuts
through is left out (half visible: neither answer is plainly right). Blocks without content
(images, list containers) have no text to check and are left out of the accuracy figures.
"""

from __future__ import annotations

import functools
import io
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageFilter

from hpdparse.engines.base import Engine, PageRequest, PageResult
from hpdparse.hpd.confidence import BlockScore, score_segment, segment_of_blocks
from hpdparse.hpd.logprobs import PageLogprobs, Segment
from hpdparse.hpd.stream import FLAG_NO_HEADER, parse_page
from hpdparse.sources.open import open_source
from tests.tinymodel import reading
from tests.tinymodel.synth import load_ground_truth

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
STREAMS = REPO / "tests" / "fixtures" / "streams"
BASE_DPI = 200


@dataclass(frozen=True)
class Level:
    name: str
    blur: float  # Gaussian blur radius, pixels at MODEL_SIDE
    noise: float  # Gaussian noise sigma, 0-255
    jpeg: int | None  # JPEG quality, None: no JPEG
    crop: float = 0.0  # share of the page's height cut off at the bottom (at full resolution)


# The model sees a page as at most 2 x 2 tiles of 112 px (plus a thumbnail): degradations are
# applied at about that size (longest side MODEL_SIDE), where they survive the tiling.
MODEL_SIDE = 320
LEVELS = (
    Level("clean", 0.0, 0.0, None),
    Level("L1", 0.5, 12.0, 50),
    Level("L2", 0.8, 24.0, 30),
    Level("L3", 1.1, 36.0, 20),
    Level("L4", 1.4, 48.0, 12),
    Level("L5", 1.8, 64.0, 8),
    Level("C1", 0.0, 0.0, None, crop=0.35),
    Level("C2", 0.0, 0.0, None, crop=0.6),
)
# For reading pages (tests/tinymodel/reading.py, read by tests/fixtures/tiny-hpd-reader).
READING_LEVELS = (
    Level("clean", 0.0, 0.0, None),
    Level("R1", 5.0, 100.0, 11),
    Level("R2", 5.75, 115.0, 10),
    Level("R3", 6.25, 125.0, 9),
    Level("R4", 6.75, 135.0, 8),
    Level("R5", 7.5, 150.0, 7),
)
READING = "reading:"  # a reading page's key: (READING + batch, index)


@dataclass(frozen=True)
class Outcome:
    """One content block the model wrote, its score and whether it was right."""

    level: str
    page: tuple[str, int]
    score: BlockScore
    right: bool
    cer: float
    # A wrong block whose text is a block of some sample page: the tiny model wrote a page it
    # remembers (another one, or its own block where the crop left none); False for text it made
    # up. Right blocks are remembered too.
    remembered: bool = True
    tokens: Segment | None = None  # the block's header and content log-probabilities
    page_logprobs: PageLogprobs | None = None  # the whole page's (for page-level scores)


@functools.cache
def pages() -> dict[tuple[str, int], str]:
    """(stem, page) -> ground-truth stream, for every sample page."""
    return load_ground_truth(STREAMS)


def is_reading(key: tuple[str, int]) -> bool:
    return key[0].startswith(READING)


def reading_keys(count: int, batch: int = 0) -> list[tuple[str, int]]:
    """Keys of `count` random reading pages (a `batch` draws other pages than the others; none
    are the pages tests/tinymodel/train_reader.py trains or checks on)."""
    return [(f"{READING}{batch}", i) for i in range(count)]


@functools.cache
def _reading_page(key: tuple[str, int]) -> reading.ReadingPage:
    return reading.reading_page(f"calibration/{key[0][len(READING) :]}/{key[1]}")


def truth_of(key: tuple[str, int]) -> str:
    """The ground-truth stream of a sample page or a reading page."""
    return _reading_page(key).stream if is_reading(key) else pages()[key]


@functools.cache
def _remembered_texts() -> frozenset[str]:
    """Every block text of every sample page (what the tiny model has memorised)."""
    return frozenset(b.content for t in pages().values() for b in parse_page(t).blocks if b.content)


def clean_image(key: tuple[str, int]) -> Image.Image:
    if is_reading(key):
        return _reading_page(key).image.convert("RGB")
    stem, page = key
    path = SAMPLES / f"{stem}.pdf"
    if not path.is_file():
        path = SAMPLES / f"{stem}.png"
    with open_source(path) as doc:
        return doc.rasterize(page, BASE_DPI)[0].convert("RGB")


def crop_share(level: Level, draw: int) -> float:
    """The share of the page's height a crop level cuts off in noise draw `draw`: the level's,
    moved by up to 0.075 from one draw to the next (so that draws differ)."""
    return level.crop + 0.05 * (draw % 4 - 1.5) if level.crop else 0.0


def degrade(image: Image.Image, level: Level, seed: int, crop: float = 0.0) -> Image.Image:
    """The page image degraded by `level` (the noise drawn from `seed`), at the model's scale,
    its bottom `crop` share cut off first."""
    import numpy as np

    if crop:
        image = image.crop((0, 0, image.width, round(image.height * (1 - crop))))
    if not (level.blur or level.noise or level.jpeg is not None):
        return image
    factor = MODEL_SIDE / max(image.size)
    out = image.resize(
        (max(1, round(image.width * factor)), max(1, round(image.height * factor))),
        Image.Resampling.BILINEAR,
    )
    if level.blur:
        out = out.filter(ImageFilter.GaussianBlur(level.blur))
    if level.noise:
        pixels = np.asarray(out, dtype=np.float32)
        noise = np.random.default_rng(seed).normal(0.0, level.noise, pixels.shape)
        out = Image.fromarray(np.clip(pixels + noise, 0, 255).astype(np.uint8))
    if level.jpeg is not None:
        buffer = io.BytesIO()
        out.save(buffer, format="JPEG", quality=level.jpeg)
        out = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return out


def decode(
    engine: Engine, images: dict[object, Image.Image], max_in_flight: int = 8
) -> dict[object, PageResult]:
    """Decode page images on a started engine: key -> result."""
    prepare = engine.preparer()
    requests = (PageRequest(key, prepare(image)) for key, image in images.items())
    return {r.key: r for r in engine.run(requests, max_in_flight)}


def block_outcomes(
    level: str, key: tuple[str, int], result: PageResult, truth: str, crop: float = 0.0
) -> list[Outcome]:
    """The scored content blocks of one decoded page, each judged against the ground truth (of
    the part a crop left, see the module docstring)."""
    if not result.ok or result.logprobs is None:
        return []
    parsed = parse_page(result.text, result.finish_reason)
    first_free = bool(parsed.blocks) and FLAG_NO_HEADER in parsed.blocks[0].flags
    segments = segment_of_blocks(result.text, result.logprobs, first_free)
    if not segments:
        return []
    expected, cut = _truth_blocks(truth, crop)
    out = []
    for block, segment in zip(parsed.blocks, segments, strict=False):
        score = score_segment(result.logprobs.segments[segment])
        if block.content is None or score is None or score.scored != "content":
            continue
        if block.content in cut:
            continue
        cer = min(
            (_edit_distance(block.content, t) / max(1, len(t)) for t in expected), default=1.0
        )
        segment_tokens = result.logprobs.segments[segment]
        right = block.content in expected
        remembered = right or (not is_reading(key) and block.content in _remembered_texts())
        out.append(
            Outcome(
                level,
                key,
                score,
                right,
                min(cer, 1.0),
                remembered,
                segment_tokens,
                result.logprobs,
            )
        )
    return out


def _truth_blocks(truth: str, crop: float) -> tuple[list[str], set[str]]:
    """The contents of the ground-truth blocks a crop left whole, and of those it cut through."""
    edge = (1 - crop) * 1000
    whole, cut = [], set()
    for b in parse_page(truth).blocks:
        if not b.content:
            continue
        if not crop or (b.bbox is not None and b.bbox[3] <= edge):
            whole.append(b.content)
        elif b.bbox is None or b.bbox[1] < edge:
            cut.add(b.content)
    return whole, cut


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


Decoded = dict[tuple[tuple[str, int], int], PageResult]  # (page, seed) -> result


def decode_levels(
    engine: Engine, levels: Sequence[Level], seeds: Iterable[int], keys: Sequence | None = None
) -> Iterator[tuple[Level, Decoded]]:
    """Decode every sample page (or `keys`) at every level and seed: each level's results, as
    soon as it is done."""
    keys = list(keys) if keys is not None else sorted(pages())
    clean = {key: clean_image(key) for key in keys}
    seeds = list(seeds)
    for level in levels:
        images = {
            (key, seed): degrade(
                clean[key], level, seed * 7919 + keys.index(key), crop_share(level, seed)
            )
            for key in keys
            for seed in seeds
        }
        yield level, decode(engine, images)  # type: ignore[misc]


def level_outcomes(level: Level, decoded: Decoded) -> list[Outcome]:
    """Every judged block of one level's decoded pages."""
    outcomes: list[Outcome] = []
    for (key, seed), result in sorted(decoded.items(), key=lambda item: item[0]):
        crop = crop_share(level, seed)
        outcomes.extend(block_outcomes(level.name, key, result, truth_of(key), crop))
    return outcomes


def run_levels(
    engine: Engine, levels: Sequence[Level], seeds: Iterable[int], keys: Sequence | None = None
) -> Iterator[tuple[Level, list[Outcome]]]:
    """`decode_levels`, judged: each level's outcomes."""
    for level, decoded in decode_levels(engine, levels, seeds, keys):
        yield level, level_outcomes(level, decoded)


# ------------------------------------------------------------------------------ figures


def auroc(wrong_scores: Sequence[float], right_scores: Sequence[float]) -> float | None:
    """P(a wrong block's confidence < a right block's), ties counting half (None when either
    side is empty)."""
    if not wrong_scores or not right_scores:
        return None
    ranked = sorted([(s, 0) for s in wrong_scores] + [(s, 1) for s in right_scores])
    # Mann-Whitney U from ranks, ties given their mean rank.
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        rank_sum += mean_rank * sum(1 for k in range(i, j) if ranked[k][1] == 1)
        i = j
    n_right, n_wrong = len(right_scores), len(wrong_scores)
    return (rank_sum - n_right * (n_right + 1) / 2) / (n_right * n_wrong)


def expected_calibration_error(outcomes: Sequence[Outcome], bins: int = 10) -> float:
    """Mean |accuracy - confidence| over equal-width confidence bins, weighted by bin size."""
    if not outcomes:
        return 0.0
    total = 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        inside = [
            o
            for o in outcomes
            if low <= o.score.confidence < high or (b == bins - 1 and o.score.confidence == 1.0)
        ]
        if inside:
            accuracy = sum(o.right for o in inside) / len(inside)
            mean = sum(o.score.confidence for o in inside) / len(inside)
            total += len(inside) * abs(accuracy - mean)
    return total / len(outcomes)


def shuffled(keys: Sequence, seed: int) -> list:
    keys = list(keys)
    random.Random(seed).shuffle(keys)
    return keys


# ------------------------------------------------------------------- saved decoded pages


def save_decoded(
    path: Path, decoded: Iterable[tuple[Level, Decoded]], append: bool = False
) -> None:
    """Write decoded levels as JSON lines (page text and log-probabilities), so that scores can
    be tried again without the model (`load_decoded`)."""
    import json

    with open(path, "a" if append else "w", encoding="utf-8") as out:
        for level, results in decoded:
            for (key, seed), result in results.items():
                record = {
                    "level": level.name,
                    "page": list(key),
                    "seed": seed,
                    "text": result.text,
                    "finish_reason": result.finish_reason,
                    "logprobs": result.logprobs.to_json() if result.logprobs else None,
                }
                out.write(json.dumps(record) + "\n")


def load_decoded(path: Path) -> list[tuple[Level, Decoded]]:
    """The levels `save_decoded` wrote, in `LEVELS` (then `READING_LEVELS`) order."""
    import json

    by_name = {level.name: level for level in LEVELS + READING_LEVELS}
    found: dict[str, Decoded] = {}
    with open(path, encoding="utf-8") as source:
        for line in source:
            r = json.loads(line)
            key = (r["page"][0], int(r["page"][1]))
            result = PageResult(
                key, r["text"], r["finish_reason"], logprobs=PageLogprobs.from_json(r["logprobs"])
            )
            found.setdefault(r["level"], {})[(key, int(r["seed"]))] = result
    return [(by_name[name], found[name]) for name in by_name if name in found]
