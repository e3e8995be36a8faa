"""Candidate confidence scores, tried on pages decoded once (bench_confidence.py --save FILE):
per block from its own tokens (mean, minimum, weakest-k mean, sum, first tokens, header), and
from the page's (its first tokens, where the tiny model decides which page it is writing; its
weakest token). Prints each candidate's ROC AUC (wrong vs right blocks) per degradation level,
on two disjoint halves of the noise draws, so that a score chosen on one half is checked on the
other.

    PYTHONPATH=$PWD python benchmarks/confidence_candidates.py pages.jsonl [--fit 0,1 --check 2,3]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tinymodel import calibration

Score = Callable[[calibration.Outcome], float]


def _weakest(values: Sequence[float], k: int) -> float:
    lowest = sorted(values)[:k]
    return sum(lowest) / len(lowest)


def _content(o: calibration.Outcome) -> tuple[float, ...]:
    assert o.tokens is not None
    return o.tokens.content


def _header(o: calibration.Outcome) -> tuple[float, ...]:
    assert o.tokens is not None
    return o.tokens.header or (0.0,)


def _page_tokens(o: calibration.Outcome) -> list[float]:
    assert o.page_logprobs is not None
    return [v for s in o.page_logprobs.segments for v in (*s.header, *s.content)]


def _page_first(o: calibration.Outcome, k: int) -> float:
    return min(_page_tokens(o)[:k])


CANDIDATES: dict[str, Score] = {
    "weakest3 (chosen)": lambda o: _weakest(_content(o), 3),
    "mean": lambda o: sum(_content(o)) / len(_content(o)),
    "min": lambda o: min(_content(o)),
    "weakest2": lambda o: _weakest(_content(o), 2),
    "weakest5": lambda o: _weakest(_content(o), 5),
    "weakest10": lambda o: _weakest(_content(o), 10),
    "sum (not length-normalised)": lambda o: sum(_content(o)),
    "first3 content": lambda o: sum(_content(o)[:3]) / len(_content(o)[:3]),
    "header min": lambda o: min(_header(o)),
    "header+content min": lambda o: min(min(_header(o)), min(_content(o))),
    "header+content weakest3": lambda o: _weakest((*_header(o), *_content(o)), 3),
    "header+content weakest2": lambda o: _weakest((*_header(o), *_content(o)), 2),
    "header+content mean": lambda o: (
        sum((*_header(o), *_content(o))) / len((*_header(o), *_content(o)))
    ),
    "page first 4 min": lambda o: _page_first(o, 4),
    "page first 12 min": lambda o: _page_first(o, 12),
    "page min": lambda o: min(_page_tokens(o)),
    "page weakest3": lambda o: _weakest(_page_tokens(o), 3),
    "min(weakest3, page first 12)": lambda o: min(_weakest(_content(o), 3), _page_first(o, 12)),
    "weakest3 + page first 12": lambda o: _weakest(_content(o), 3) + _page_first(o, 12),
}


def _by_level(path: Path, seeds: set[int]) -> dict[str, list[calibration.Outcome]]:
    out = {}
    for level, decoded in calibration.load_decoded(path):
        chosen = {k: r for k, r in decoded.items() if k[1] in seeds}
        out[level.name] = calibration.level_outcomes(level, chosen)
    return out


def _auroc(
    outcomes: list[calibration.Outcome], score: Score, made_up: bool = False
) -> float | None:
    wrong = [score(o) for o in outcomes if not o.right and not (made_up and o.remembered)]
    right = [score(o) for o in outcomes if o.right]
    return calibration.auroc(wrong, right)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", type=Path)
    parser.add_argument("--fit", default="0,1")
    parser.add_argument("--check", default="2,3")
    args = parser.parse_args(argv)
    halves = {
        name: _by_level(args.pages, {int(s) for s in seeds.split(",")})
        for name, seeds in (("fit", args.fit), ("check", args.check))
    }
    levels = list(halves["fit"])
    print("blocks wrong / judged per level:")
    for half, outcomes in halves.items():
        shares = [
            f"{lv} {sum(not o.right for o in outcomes[lv])}/{len(outcomes[lv])}" for lv in levels
        ]
        print(f"  {half:5}  " + "  ".join(shares))
    for made_up in (False, True):
        wrong = "made-up" if made_up else "all"
        print(f"\nAUROC, {wrong} wrong blocks vs right ones (fit / check):")
        print(f"{'candidate':30} " + " ".join(f"{lv:>11}" for lv in levels))
        for name, score in CANDIDATES.items():
            cells = []
            for lv in levels:
                pair = [_auroc(halves[h][lv], score, made_up) for h in ("fit", "check")]
                cells.append("/".join("  - " if a is None else f"{a:.2f}" for a in pair))
            print(f"{name:30} " + " ".join(f"{c:>11}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
