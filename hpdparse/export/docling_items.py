"""DoclingDocument items appended as docling-core's `add_*` methods append them, about three
times faster.

`add_text` and its peers build an item from a few arguments and leave its list fields
(`children`, `prov`, `captions`, ...) to their defaults, which pydantic deep-copies at every
item (`copy.deepcopy` of an empty list, several per item: more than half of each item's
construction). Here every list field is given, so nothing is copied; each item is still built,
and validated, by its own docling-core class, and gets the same `self_ref`, `parent`, place in
its parent's `children` and field values as the `add_*` method would give it. Its parent
reference and provenance may be given as the plain data of their models (`Provenance`), which
the item's validation builds in the same call (a model built alone costs a Python call of its
own). tests/export/test_docling_items.py checks both give the same document."""

from __future__ import annotations

import functools
from typing import Any, TypedDict, TypeVar

from docling_core.types.doc import ContentLayer, CoordOrigin, DoclingDocument, NodeItem, RefItem

_Item = TypeVar("_Item", bound=NodeItem)

_REF = RefItem.__pydantic_validator__


class Provenance(TypedDict):
    """A ProvenanceItem's fields, validated with the item (`bbox`: a BoundingBox's fields)."""

    page_no: int
    bbox: dict[str, float | CoordOrigin]
    charspan: tuple[int, int]


@functools.cache
def _list_fields(cls: type[NodeItem]) -> tuple[str, ...]:
    """The fields of `cls` whose default is a list (each needs a list of its own)."""
    return tuple(name for name, f in cls.model_fields.items() if isinstance(f.default, list))


def append_item(
    doc: DoclingDocument,
    collection: str,
    cls: type[_Item],
    *,
    parent: NodeItem | None = None,
    prov: list[Provenance] | None = None,
    content_layer: ContentLayer | None = None,
    **fields: Any,
) -> _Item:
    """A new `cls` item at the end of `doc.<collection>`, a child of `parent` (the body by
    default), with `prov` (none: no provenance) and the other fields given."""
    items: list[Any] = getattr(doc, collection)
    parent = parent or doc.body
    cref = f"#/{collection}/{len(items)}"
    values: dict[str, object] = {name: [] for name in _list_fields(cls)}
    if prov:
        values["prov"] = prov
    if content_layer:
        values["content_layer"] = content_layer
    values.update(fields)
    values["self_ref"] = cref
    values["parent"] = {"cref": parent.self_ref}  # the RefItem `add_*` gives, built with the item
    # (the validators themselves: model_validate and __init__ add a Python call each)
    item = cls.__pydantic_validator__.validate_python(values)
    items.append(item)
    parent.children.append(_REF.validate_python({"cref": cref}))
    return item
