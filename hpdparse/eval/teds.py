"""TEDS (tree-edit-distance-based similarity) of two HTML tables, with its structure-only
variant: 1 - APTED distance / node count of the larger tree, cells renamed at their normalized
edit distance (OmniDocBench's metrics/table_metric.py, the PubTabNet definition)."""

from __future__ import annotations

from typing import Any

from apted import APTED, Config
from lxml import etree, html
from rapidfuzz.distance import Levenshtein


class _Node:
    __slots__ = ("children", "content", "key", "renames", "tag")

    def __init__(self, tag: str, colspan: int | None, rowspan: int | None, content: Any) -> None:
        self.tag, self.key, self.content = tag, (tag, colspan, rowspan), content
        self.children: list[_Node] = []
        # rename costs to the other tree's nodes: APTED asks for each pair many times, and a
        # dict keyed by the node itself (hashed by identity) is the cheapest lookup
        self.renames: dict[_Node, float] = {}


class _CellConfig(Config):
    def rename(self, node1: _Node, node2: _Node) -> float:
        cost = node1.renames.get(node2)
        if cost is None:
            cost = node1.renames[node2] = self._rename(node1, node2)
        return cost

    @staticmethod
    def _rename(node1: _Node, node2: _Node) -> float:
        if node1.key != node2.key:
            return 1.0
        if node1.tag == "td" and (node1.content or node2.content):
            a, b = node1.content, node2.content
            return Levenshtein.distance(a, b) / max(len(a), len(b))
        return 0.0

    def children(self, node: _Node) -> list[_Node]:
        return node.children


def _cell_tokens(node: etree._Element, tokens: list[str]) -> None:
    tokens.append(f"<{node.tag}>")
    if node.text is not None:
        tokens.extend(node.text)
    for child in node.getchildren():
        _cell_tokens(child, tokens)
    if node.tag != "unk":
        tokens.append(f"</{node.tag}>")
    if node.tag != "td" and node.tail is not None:
        tokens.extend(node.tail)


def _tree(node: etree._Element, structure_only: bool) -> _Node:
    if node.tag == "td":
        tokens: list[str] = []
        if not structure_only:
            _cell_tokens(node, tokens)
        colspan, rowspan = (int(node.attrib.get(name, "1")) for name in ("colspan", "rowspan"))
        return _Node("td", colspan, rowspan, tokens[1:-1])
    tree = _Node(node.tag, None, None, None)
    tree.children = [_tree(child, structure_only) for child in node.getchildren()]
    return tree


_PARSER = html.HTMLParser(remove_comments=True, encoding="utf-8")


def _table(markup: str) -> etree._Element | None:
    tables = html.fromstring(markup, parser=_PARSER).xpath("body/table")
    return tables[0] if tables else None


def _signature(node: _Node) -> tuple:
    return (node.key, node.content, [_signature(child) for child in node.children])


def teds(pred: str, truth: str, structure_only: bool = False) -> float:
    """1.0 for the same table, 0.0 where either side is empty or holds no <table>."""
    if not pred or not truth:
        return 0.0
    pred_table, truth_table = _table(pred), _table(truth)
    if pred_table is None or truth_table is None:
        return 0.0
    nodes = max(len(pred_table.xpath(".//*")), len(truth_table.xpath(".//*")))
    pred_tree, truth_tree = _tree(pred_table, structure_only), _tree(truth_table, structure_only)
    if _signature(pred_tree) == _signature(truth_tree):  # the same tree: distance 0, exactly
        distance = 0.0
    else:
        distance = APTED(pred_tree, truth_tree, _CellConfig()).compute_edit_distance()
    return 1.0 - float(distance) / nodes
