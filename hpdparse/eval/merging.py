"""The steps of OmniDocBench's quick match (utils/match_quick.py there) that join lines: predicted
lines merged to match one truncated truth block, truth blocks found inside one predicted line,
and the final one-to-many pairs. Kept step for step: the figures depend on its details."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache, partial

import numpy as np
from rapidfuzz.distance import Levenshtein
from rapidfuzz.process import cdist
from scipy.optimize import linear_sum_assignment

Matches = dict[tuple[int, ...], list[int]]  # predicted line indices -> their truth lines


# edit distance / the longer length (0.0 for two empty strings)
normalized_distance = Levenshtein.normalized_distance


def distance_matrix(truth: list[str], pred: list[str]) -> np.ndarray:
    return cdist(truth, pred, scorer=normalized_distance, dtype=np.float64)


def best_window(long: str, short: str) -> float | None:
    """The smallest edit distance (per character of `short`) of `short` to a same-length window
    of `long`; None where `short` is empty or longer."""
    size = len(short)
    if not 0 < size <= len(long):
        return None
    windows = [long[i : i + size] for i in range(len(long) - size + 1)]
    return int(cdist([short], windows, scorer=Levenshtein.distance).min()) / size


def _merge_helps(
    truth: str, preds: list[str], fit: Callable[[str], float | None], threshold: float = 0.6
) -> tuple[bool, bool]:
    """(whether the last of two or more predicted lines belongs to the merged prediction for
    `truth`, whether to try the next one). fit(line): best_window(truth, line)."""
    current, merged = " ".join(preds[:-1]), " ".join(preds)
    if normalized_distance(truth, merged) > normalized_distance(truth, current):
        return False, False
    for pred in preds[:-1]:
        window = fit(pred)
        if window is None or window > threshold:
            return False, False
    added = fit(preds[-1])
    if added is None:
        return False, False
    return added < threshold, len(merged) <= len(truth)


def _best_runs(matrix: np.ndarray, truth: list[str], pred: list[str]) -> tuple[list, list]:
    """For each truth line not matched at once: the run of consecutive unmatched predicted lines
    that matches it best, and that run's distance."""
    first = np.argwhere(matrix < 0.25)
    taken_truth, taken_pred = set(first[:, 0].tolist()), set(first[:, 1].tolist())
    free_pred = [j for j in range(matrix.shape[1]) if j not in taken_pred]
    runs, costs = [], []
    for t in (i for i in range(matrix.shape[0]) if i not in taken_truth):
        candidates, distances = [], []
        fit = cache(partial(best_window, truth[t]))  # the runs share lines: each fitted once
        for start in free_pred:
            step, merged = 1, [pred[start]]
            while start + step not in taken_pred and start + step < len(pred):
                merged.append(pred[start + step])
                helps, go_on = _merge_helps(truth[t], merged, fit)
                if not helps:
                    break
                step += 1
                if not go_on:
                    break
            candidates.append(list(range(start, start + step)))
            distances.append(normalized_distance(truth[t], " ".join(pred[start : start + step])))
        if distances:
            best = min(distances)
            runs.append(candidates[distances.index(best)])
            costs.append(best)
    return runs, costs


def _choose_path(group: list[tuple[list[int], float]]) -> list[list[int]]:
    paths = [[group[0]]]
    for run in group[1:]:
        new_path = True
        for items in paths:
            overlap = same = False
            for item in items:  # the list may grow while it is walked, as in OmniDocBench
                if item[0] == run[0]:
                    overlap = same = True
                    if item[1] > run[1]:
                        items.pop(items.index(item))
                        items.append(run)
                elif set(item[0]) & set(run[0]):
                    overlap = True
            if not overlap:
                items.append(run)
                new_path = False
            if same:
                new_path = False
        if new_path:
            paths.append([run])
    best = min(paths, key=lambda items: sum(item[1] for item in items) / len(items))  # the first
    return [item[0] for item in best]


def _final_runs(runs: list[list[int]], costs: list[float]) -> list[list[int]]:
    if not runs:
        return []
    ordered = sorted(zip(runs, costs, strict=True), key=lambda item: item[0][0])
    groups = [[ordered[0]]]
    for item in ordered[1:]:
        if any(set(item[0]) & set(other[0]) for other in groups[-1]):
            groups[-1].append(item)
        else:
            groups.append([item])
    final: list[list[int]] = []
    for group in groups:
        final.extend([group[0][0]] if len(group) == 1 else _choose_path(group))
    return final


def merge_truncated(
    matrix: np.ndarray, truth: list[str], pred: list[str]
) -> tuple[np.ndarray, list[list[int]]]:
    """Predicted lines joined where a run of them matches a truth line better: the new distance
    matrix and, per column, its predicted indices (one, or the joined run)."""
    columns = [[p] for p in range(len(pred))]
    final = _final_runs(*_best_runs(matrix, truth, pred))
    if not final:
        return matrix, columns
    for run in final:  # runs are consecutive indices
        at = columns.index([run[0]])
        del columns[at : at + len(run)]
        columns.insert(at, run)
    return distance_matrix(truth, [" ".join(pred[c[0] : c[-1] + 1]) for c in columns]), columns


def assign(truth: list[str], pred: list[str]) -> tuple[dict[int, list[int]], list[int]]:
    """Hungarian assignment after merging: {truth index: predicted indices} for the pairs
    closer than 0.7, and the truth indices left over."""
    merged_matrix, columns = merge_truncated(distance_matrix(truth, pred), truth, pred)
    rows, cols = linear_sum_assignment(merged_matrix)
    matches, unmatched_truth = {}, []
    pairs = {int(r): (columns[c], merged_matrix[r][c]) for r, c in zip(rows, cols, strict=True)}
    for t in range(len(truth)):
        column, cost = pairs.get(t, ([], math.inf))
        if cost > 0.7:
            unmatched_truth.append(t)
        else:
            matches[t] = list(range(column[0], column[-1] + 1))
    return matches, unmatched_truth


def contained_truth(
    unmatched_truth: list[int], truth: list[str], pred: list[str]
) -> dict[int, list[int]]:
    """{predicted index: unmatched truth lines found inside that predicted line}."""
    found = {}
    for p, line in enumerate(pred):
        windows = ((t, best_window(line, truth[t])) for t in unmatched_truth)
        inside = [t for t, window in windows if window is not None and window < 0.4]
        if inside:
            found[p] = inside
    return found


def combine(matches: dict[int, list[int]], contained: dict[int, list[int]]) -> Matches:
    """{predicted indices: their truth indices}: the assigned pairs, then the truth lines found
    inside a predicted line (each truth line once)."""
    final: Matches = {}
    for t, indices in matches.items():
        final.setdefault(tuple(sorted(indices)), []).append(t)
    done = set(matches)
    for p, inside in contained.items():
        truths = final.setdefault((p,), [])
        truths += [t for t in inside if t not in done]
        done.update(truths)
    return final


def pairs_of(final: Matches, truth: list[str], pred: list[str]) -> list[tuple[int | None, tuple]]:
    """(truth index, predicted indices) pairs, then the left-over lines: predicted ones assigned
    to left-over truth or gathered in one entry without truth (None); truth ones alone (no
    predicted index)."""
    pairs: list[tuple[int | None, tuple]] = [
        (t, key) for key, truths in final.items() for t in sorted(set(truths))
    ]
    matched_truth = set().union(*[set(truths) for truths in final.values()])
    left_truth = set(range(len(truth))) - matched_truth
    left_pred = set(range(len(pred))) - {p for key in final for p in key}
    if left_pred and left_truth:
        truth_list, pred_list = list(left_truth), list(left_pred)
        matrix = distance_matrix([truth[t] for t in truth_list], [pred[p] for p in pred_list])
        for i, j in zip(*linear_sum_assignment(matrix), strict=True):
            pairs.append((truth_list[i], (pred_list[j],)))
    elif left_pred:
        pairs.append((None, tuple(left_pred)))
    else:
        pairs += [(t, ()) for t in left_truth]
    return pairs


def group_by_prediction(
    pairs: list[tuple[int | None, tuple]], truth: list[int]
) -> list[tuple[list, list[int]]]:
    """(truth indices, predicted indices): one entry per predicted line set, with all its truth
    lines; then each truth line without a prediction."""
    grouped: list[tuple[list, list[int]]] = []
    seen_pred, seen_truth = set(), set()
    for _, key in pairs:
        if key in seen_pred or not key:
            continue
        truths = [t for t, other in pairs if other == key]
        grouped.append((truths, list(key)))
        seen_pred.add(key)
        seen_truth.update(truths)
    return grouped + [([t], []) for t in range(len(truth)) if t not in seen_truth]
