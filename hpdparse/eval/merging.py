"""The steps of OmniDocBench's quick match (utils/match_quick.py there) that join lines: predicted
lines merged to match one truncated truth block, truth blocks found inside one predicted line,
and the final one-to-many pairs. Kept step for step: the figures depend on its details."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from rapidfuzz.distance import Levenshtein
from rapidfuzz.process import cdist
from scipy.optimize import linear_sum_assignment

Matches = dict[tuple[Any, ...], dict[str, Any]]


def normalized_distance(a: Any, b: Any) -> float:
    return Levenshtein.distance(a, b) / max(len(a), len(b))


def distance_matrix(truth: list[str], pred: list[str]) -> np.ndarray:
    matrix = np.zeros((len(truth), len(pred)))
    for i, t in enumerate(truth):
        for j, p in enumerate(pred):
            if t or p:
                matrix[i][j] = normalized_distance(t, p)
    return matrix


def best_window(long: str, short: str) -> float | None:
    """The smallest edit distance (per character of `short`) of `short` to a same-length window
    of `long`; None where `short` is empty or longer."""
    size = len(short)
    if not 0 < size <= len(long):
        return None
    windows = [long[i : i + size] for i in range(len(long) - size + 1)]
    return int(cdist([short], windows, scorer=Levenshtein.distance).min()) / size


def _merge_helps(truth: str, preds: list[str], threshold: float = 0.6) -> tuple[bool, bool]:
    """(whether the last predicted line belongs to the merged prediction for `truth`, whether
    to try the next one)."""
    if len(preds) == 1:
        return False, False
    current, merged = " ".join(preds[:-1]), " ".join(preds)
    if normalized_distance(truth, merged) > normalized_distance(truth, current):
        return False, False
    for pred in preds[:-1]:
        window = best_window(truth, pred)
        if window is None or window > threshold:
            return False, False
    added = best_window(truth, preds[-1])
    if added is None:
        return False, False
    return added < threshold, len(merged) <= len(truth)


def _best_runs(matrix: np.ndarray, truth: list[str], pred: list[str]) -> tuple[list, list]:
    """For each truth line not matched at once: the run of consecutive unmatched predicted lines
    that matches it best, and that run's distance."""
    first = np.argwhere(matrix < 0.25)
    taken_truth = [int(i[0]) for i in first]
    taken_pred = [int(i[1]) for i in first]
    free_pred = [j for j in range(matrix.shape[1]) if j not in taken_pred]
    runs, costs = [], []
    for t in (i for i in range(matrix.shape[0]) if i not in taken_truth):
        candidates, distances = [], []
        for start in free_pred:
            step, merged = 1, [pred[start]]
            while start + step not in taken_pred and start + step < len(pred):
                merged.append(pred[start + step])
                helps, go_on = _merge_helps(truth[t], merged)
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
    paths: dict[int, list[tuple[list[int], float]]] = defaultdict(list)
    paths[0].append(group[0])
    for run in group[1:]:
        new_path = True
        for items in paths.values():
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
            paths[len(paths)].append(run)
    best_cost, best = float("inf"), []
    for items in paths.values():
        cost = sum(item[1] for item in items) / len(items)
        if cost < best_cost:
            best, best_cost = [item[0] for item in items], cost
    return best


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
) -> tuple[np.ndarray, list[Any]]:
    """Predicted lines joined where a run of them matches a truth line better: the new distance
    matrix and, per column, the predicted index or the list of joined indices."""
    final = _final_runs(*_best_runs(matrix, truth, pred))
    if not final:
        return matrix, list(range(len(pred)))
    columns: list[Any] = list(range(len(pred)))
    for run in final:
        at = columns.index(run[0])
        for _ in run:
            columns.pop(at)
        columns.insert(at, run)
    lines = [" ".join(pred[c[0] : c[-1] + 1]) if isinstance(c, list) else pred[c] for c in columns]
    return distance_matrix(truth, lines), columns


def assign(matrix: np.ndarray, truth: list[str], pred: list[str]) -> tuple[dict, list[int]]:
    """Hungarian assignment after merging: {truth index: {pred_indices, edit_distance}} for the
    pairs closer than 0.7, and the truth indices left over."""
    merged_matrix, columns = merge_truncated(matrix, truth, pred)
    rows, cols = linear_sum_assignment(merged_matrix)
    matches, unmatched_truth = {}, []
    pairs = {int(r): (columns[c], merged_matrix[r][c]) for r, c in zip(rows, cols, strict=True)}
    for t in range(len(truth)):
        if t not in pairs:
            unmatched_truth.append(t)
            continue
        column, cost = pairs[t]
        indices = list(range(column[0], column[-1] + 1)) if isinstance(column, list) else [column]
        if cost > 0.7:
            unmatched_truth.append(t)
        else:
            matches[t] = {"pred_indices": indices, "edit_distance": cost}
    return matches, unmatched_truth


def contained_truth(unmatched_truth: list[int], truth: list[str], pred: list[str]) -> dict:
    """{predicted index: unmatched truth lines found inside that predicted line}."""
    found = {}
    for p, line in enumerate(pred):
        inside = []
        for t in unmatched_truth:
            window = best_window(line, truth[t])
            if (1 if window is None else window) < 0.4:
                inside.append(t)
        if inside:
            found[p] = inside
    return found


def combine(matches: dict, contained: dict) -> Matches:
    final: Matches = {}
    done: set[int] = set()
    for t, info in matches.items():
        key = tuple(sorted(info["pred_indices"]))
        if key in final:
            if t not in done:
                final[key]["gt_indices"].append(t)
                done.add(t)
        else:
            final[key] = {"gt_indices": [t], "edit_distance": info["edit_distance"]}
            done.add(t)
    for p, inside in contained.items():
        key = (p,)
        if key in final:
            for t in inside:
                if t not in done:
                    final[key]["gt_indices"].append(t)
                    done.add(t)
        else:
            final[key] = {"gt_indices": [t for t in inside if t not in done], "edit_distance": None}
            done.update(final[key]["gt_indices"])
    return final


def rescore(final: Matches, truth: list[str], pred: list[str]) -> None:
    for key, info in final.items():
        indices = sorted(set(info["gt_indices"]))
        if not indices:
            info["edit_distance"] = 1
        elif len(indices) > 1:  # OmniDocBench compares the joined truth with the first line only
            joined = "".join(truth[t] for t in indices)
            first = pred[key[0]]
            info["edit_distance"] = normalized_distance(joined, first) if joined or first else 1
        else:
            text = " ".join(pred[p] for p in key)
            t = truth[indices[0]]
            info["edit_distance"] = normalized_distance(t, text) if t or text else 1


def pairs_of(final: Matches, truth: list[str], pred: list[str]) -> list[dict[str, Any]]:
    """The pairs, then the left-over lines: predicted ones assigned to left-over truth (distance
    1) or gathered in one entry without truth; truth ones alone (distance 1)."""
    pairs = []
    for key, info in final.items():
        text = " ".join(pred[p] for p in key)
        for t in sorted(set(info["gt_indices"])):
            pairs.append(
                {
                    "gt_idx": t,
                    "gt": truth[t],
                    "pred_idx": list(key),
                    "pred": text,
                    "edit": info["edit_distance"],
                }
            )
    all_truth, all_pred = set(range(len(truth))), set(range(len(pred)))
    matched_truth = set().union(*[set(info["gt_indices"]) for info in final.values()])
    left_truth = all_truth - matched_truth
    left_pred = all_pred - {p for key in final for p in key}
    if left_pred and left_truth:
        truth_list, pred_list = list(left_truth), list(left_pred)
        matrix = [[normalized_distance(truth[t], pred[p]) for p in pred_list] for t in truth_list]
        for i, j in zip(*linear_sum_assignment(matrix), strict=True):
            t, p = truth_list[i], pred_list[j]
            pairs.append({"gt_idx": t, "gt": truth[t], "pred_idx": [p], "pred": pred[p], "edit": 1})
    elif left_pred:
        pairs.append(
            {
                "gt_idx": "",
                "gt": "",
                "pred_idx": list(left_pred),
                "pred": " ".join(pred[p] for p in left_pred),
                "edit": 1,
            }
        )
    else:
        for t in left_truth:
            pairs.append({"gt_idx": t, "gt": truth[t], "pred_idx": "", "pred": "", "edit": 1})
    return pairs


def group_by_prediction(
    pairs: list[dict[str, Any]], truth_count: int, truth_raw: list[str]
) -> list[dict[str, Any]]:
    """One entry per predicted line set, with all its truth lines; then each truth line without
    a prediction (distance 1)."""
    grouped, seen_pred, seen_truth = [], set(), set()

    def key_of(pair: dict[str, Any]) -> tuple[Any, ...]:
        return (
            tuple(pair["pred_idx"]) if isinstance(pair["pred_idx"], list) else (pair["pred_idx"],)
        )

    for pair in pairs:
        key = key_of(pair)
        if key in seen_pred or key == ("",):
            continue
        entry = {
            "gt_idx": [pair["gt_idx"]],
            "gt": pair["gt"],
            "pred_idx": pair["pred_idx"],
            "pred": pair["pred"],
            "edit": pair["edit"],
        }
        for other in pairs:
            if other is not pair and key_of(other) == key:
                entry["gt_idx"].append(other["gt_idx"])
                entry["gt"] += other["gt"]
                seen_truth.add(other["gt_idx"])
        grouped.append(entry)
        seen_pred.add(key)
        seen_truth.add(pair["gt_idx"])
    for t in range(truth_count):
        if t not in seen_truth:
            grouped.append(
                {"gt_idx": [t], "gt": truth_raw[t], "pred_idx": [""], "pred": "", "edit": 1}
            )
    return grouped
