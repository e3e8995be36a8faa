"""Does block confidence mean something? Pages with exact ground truth, clean and degraded
(tests/tinymodel/calibration.py), decoded through an engine; per degradation level: block accuracy
(exact match, mean character error rate), the ROC AUC of confidence for "block wrong" vs "block
right", the expected calibration error, and the share of wrong blocks caught at `--flag-below`.

    PYTHONPATH=$PWD python benchmarks/bench_confidence.py [--pages reading|samples]
        [--model PATH] [--engine torch] [--save pages.jsonl | --load pages.jsonl]

`--pages reading` (the default): `--count` random reading pages (tests/tinymodel/reading.py,
page batch `--batch`) read by tests/fixtures/tiny-hpd-reader, a checkpoint trained to read such
pages. `--pages samples`: the six sample pages read by tests/fixtures/tiny-hpd, which recites
pages it memorised (a page swap is written as surely as the right page: see the README).

`--scores` also prints the AUROC of the candidate scores the block figures allow (mean, minimum,
weakest-tokens mean), which is how the confidence was chosen. The last line reads
``AUROC min over the 10-60% levels: A`` (levels where 10-60% of the blocks are wrong).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpdparse.engines.base import EngineConfig
from hpdparse.engines.registry import create_engine
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from tests.tinymodel import calibration

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
MODELS = {"reading": FIXTURES / "tiny-hpd-reader", "samples": FIXTURES / "tiny-hpd"}
CANDIDATES = {
    "confidence": lambda s: s.confidence,
    "exp(mean)": lambda s: math.exp(s.mean_logprob),
    "exp(min)": lambda s: math.exp(s.min_logprob),
    "exp(weakest)": lambda s: math.exp(s.weakest_logprob),
}


def level_line(
    name: str, outcomes: list, flag_below: float, scores: bool
) -> tuple[str, float | None, float]:
    wrong = [o for o in outcomes if not o.right]
    right = [o for o in outcomes if o.right]
    share_wrong = len(wrong) / len(outcomes) if outcomes else 0.0
    cer = sum(o.cer for o in outcomes) / len(outcomes) if outcomes else 0.0
    area = calibration.auroc(
        [o.score.confidence for o in wrong], [o.score.confidence for o in right]
    )
    ece = calibration.expected_calibration_error(outcomes)
    caught = sum(o.score.confidence < flag_below for o in wrong) / len(wrong) if wrong else 0.0
    flagged_right = (
        sum(o.score.confidence < flag_below for o in right) / len(right) if right else 0.0
    )
    made_up = [o for o in wrong if not o.remembered]
    swap = calibration.auroc(
        [o.score.confidence for o in wrong if o.remembered], [o.score.confidence for o in right]
    )
    invented = calibration.auroc(
        [o.score.confidence for o in made_up], [o.score.confidence for o in right]
    )
    caught_made_up = (
        sum(o.score.confidence < flag_below for o in made_up) / len(made_up) if made_up else 0.0
    )
    line = (
        f"{name:8} blocks {len(outcomes):4}  exact {1 - share_wrong:6.1%}  CER {cer:6.3f}  "
        f"AUROC {_fmt(area)}  ECE {ece:.3f}  caught@{flag_below} {caught:6.1%} "
        f"(right flagged {flagged_right:5.1%})"
    )
    if not all(calibration.is_reading(o.page) for o in outcomes):  # sample pages: remembered?
        line += (
            f"\n         wrong: {len(wrong) - len(made_up)} remembered (AUROC {_fmt(swap)}), "
            f"{len(made_up)} made up (AUROC {_fmt(invented)}, caught@{flag_below} "
            f"{caught_made_up:6.1%})"
        )
    if scores:
        for label, fn in CANDIDATES.items():
            a = calibration.auroc([fn(o.score) for o in wrong], [fn(o.score) for o in right])
            line += f"\n           {label:13} AUROC {_fmt(a)}"
    return line, area, share_wrong


def _fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", choices=sorted(MODELS), default="reading")
    parser.add_argument("--model", help="checkpoint (default: the one made for --pages)")
    parser.add_argument("--engine", default="torch")
    parser.add_argument("--count", type=int, default=60, help="reading pages")
    parser.add_argument("--batch", type=int, default=0, help="which random reading pages")
    parser.add_argument("--seeds", type=int, default=2, help="noise draws per page and level")
    parser.add_argument("--flag-below", type=float, default=DEFAULT_FLAG_BELOW)
    parser.add_argument("--scores", action="store_true", help="AUROC of each candidate score")
    parser.add_argument("--levels", default=None, help="comma-separated level names")
    parser.add_argument("--save", type=Path, help="keep the decoded pages in this file")
    parser.add_argument("--load", type=Path, help="score pages --save kept (no model)")
    args = parser.parse_args(argv)
    reading = args.pages == "reading"
    levels = calibration.READING_LEVELS if reading else calibration.LEVELS
    keys = calibration.reading_keys(args.count, args.batch) if reading else None
    model = args.model or str(MODELS[args.pages])
    if args.levels:
        levels = tuple(lv for lv in levels if lv.name in args.levels.split(","))
    started = time.monotonic()
    in_range, everything = [], []
    with contextlib.ExitStack() as stack:
        if args.load:
            print(f"pages decoded earlier: {args.load}", flush=True)
            names = {lv.name for lv in levels}
            decoded = iter([d for d in calibration.load_decoded(args.load) if d[0].name in names])
        else:
            pages = f"{args.count} reading pages (batch {args.batch})" if reading else "samples"
            print(f"{args.engine} {model}, {pages}, {args.seeds} draw(s) per page and level")
            config = EngineConfig(model=model, mtp=False)
            engine = stack.enter_context(create_engine(args.engine, config))
            decoded = calibration.decode_levels(engine, levels, range(args.seeds), keys)
        if args.save:
            args.save.write_text("")
        for level, results in decoded:
            if args.save:  # level by level, so that a long run keeps what it has done
                calibration.save_decoded(args.save, [(level, results)], append=True)
            outcomes = calibration.level_outcomes(level, results)
            line, area, share_wrong = level_line(level.name, outcomes, args.flag_below, args.scores)
            print(line, flush=True)
            everything.extend(outcomes)
            if 0.10 <= share_wrong <= 0.60 and area is not None:
                in_range.append(area)
    line, _, _ = level_line("all", everything, args.flag_below, args.scores)
    print(line)
    print(f"{len(everything)} blocks in {time.monotonic() - started:.0f} s")
    print(f"AUROC min over the 10-60% levels: {_fmt(min(in_range)) if in_range else 'n/a'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
