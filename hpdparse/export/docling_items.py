"""DoclingDocument items made without pydantic's validation, for the values the export already
knows to be valid: the same objects, faster to build.

Validating an item (a text, a heading, a table...) deep-copies each of its empty default lists
(children, prov, source, comments, captions...): most of an item's cost. `construct` fills an
item's fields from its declared defaults directly, as pydantic's `model_construct` does (which
is no faster than validation: it walks every field in Python). Small models with no list
(references, boxes, provenance, table cells) validate faster than Python could construct them,
so they stay validated. `FastAdder` does what `DoclingDocument.add_*` does for the arguments the
export passes, with constructed items.

docling-core stays the producer of record: `to_docling(..., validated=True)` builds through its
own `add_*` API with every item validated, and tests/export check on every test document that
both documents are equal and dump to the same bytes, and that the constructed one validates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from docling_core.types.doc import (
    CodeItem,
    CodeLanguageLabel,
    ContentLayer,
    DocItemLabel,
    DoclingDocument,
    FormulaItem,
    ImageRef,
    ListGroup,
    ListItem,
    NodeItem,
    PictureItem,
    ProvenanceItem,
    RefItem,
    SectionHeaderItem,
    TableData,
    TableItem,
    TextItem,
    TitleItem,
)
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class _Template:
    defaults: dict[str, Any]  # every field in declaration order (pydantic dumps __dict__ so)
    empty_lists: tuple[str, ...]  # fields whose default is a fresh empty list per instance
    required: frozenset[str]  # fields with no default (or a factory): the caller gives them


_TEMPLATES: dict[type, _Template] = {}


def construct(cls: type[Model], /, **values: Any) -> Model:
    """`cls(**values)` without validation, for values that would pass it unchanged (the right
    types: floats as floats, enums as enums). Models with private attributes or a post-init
    hook are refused (see `_template`); so are unknown or missing fields."""
    template = _TEMPLATES.get(cls) or _template(cls)
    data = template.defaults.copy()
    for name in template.empty_lists:
        data[name] = []
    data.update(values)
    if len(data) != len(template.defaults) or not template.required <= values.keys():
        raise TypeError(f"{cls.__name__}: unknown or missing fields in {sorted(values)}")
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", data)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def _template(cls: type[BaseModel]) -> _Template:
    if cls.__private_attributes__ or cls.__pydantic_post_init__:
        raise TypeError(f"{cls.__name__} has private attributes or a post-init: validate it")
    defaults: dict[str, Any] = {}
    empty_lists: list[str] = []
    required: set[str] = set()
    for name, field in cls.model_fields.items():
        default = field.default
        defaults[name] = None
        if field.default_factory is not None or default is PydanticUndefined:
            required.add(name)
        elif type(default) is list and not default:
            empty_lists.append(name)
        elif isinstance(default, list | dict | set):
            raise TypeError(f"{cls.__name__}.{name}: a mutable default: validate it")
        else:
            defaults[name] = default  # None, enums, numbers, strings: shared safely
    _TEMPLATES[cls] = _Template(defaults, tuple(empty_lists), frozenset(required))
    return _TEMPLATES[cls]


class FastAdder:
    """`DoclingDocument.add_*` for the arguments the export passes (one provenance entry, the
    body or a given parent), with constructed items. Same items, same order, same refs."""

    def __init__(self, doc: DoclingDocument) -> None:
        self.doc = doc

    def add_page(self, page_no: int, size: Any) -> None:
        self.doc.add_page(page_no=page_no, size=size)  # a few per document: validated

    def _append(
        self,
        collection: list,
        name: str,
        cls: type[NodeItem],
        parent: NodeItem | None,
        prov: ProvenanceItem | None,
        **values: Any,
    ) -> Any:
        parent = parent or self.doc.body
        cref = f"#/{name}/{len(collection)}"
        item = construct(cls, self_ref=cref, parent=RefItem(cref=parent.self_ref), **values)
        if prov is not None:
            item.prov.append(prov)
        collection.append(item)
        parent.children.append(RefItem(cref=cref))
        return item

    def _text(self, cls: type[TextItem], text: str, prov, parent=None, **values: Any) -> Any:
        values.setdefault("orig", text)
        return self._append(self.doc.texts, "texts", cls, parent, prov, text=text, **values)

    def add_title(self, text: str, prov: ProvenanceItem | None) -> TitleItem:
        return self._text(TitleItem, text, prov, formatting=None, hyperlink=None)

    def add_heading(self, text: str, level: int, prov: ProvenanceItem | None) -> NodeItem:
        if not 1 <= level <= 100:
            return self.doc.add_heading(text=text, level=level, prov=prov)  # its error
        return self._text(SectionHeaderItem, text, prov, level=level)

    def add_text(
        self,
        label: DocItemLabel,
        text: str,
        prov: ProvenanceItem | None,
        parent: NodeItem | None = None,
        content_layer: ContentLayer | None = None,
    ) -> TextItem:
        if label in _SPECIAL_TEXT_LABELS:
            return self.doc.add_text(
                label=label, text=text, prov=prov, parent=parent, content_layer=content_layer
            )
        item = self._text(TextItem, text, prov, parent, label=label)
        if content_layer:
            item.content_layer = content_layer
        return item

    def add_list_group(self) -> ListGroup:
        return self._append(self.doc.groups, "groups", ListGroup, None, None)

    def add_list_item(
        self,
        text: str,
        enumerated: bool,
        marker: str,
        parent: ListGroup,
        prov: ProvenanceItem | None,
    ) -> ListItem:
        values = {"enumerated": enumerated, "marker": marker or ""}
        return self._text(ListItem, text, prov, parent, **values)

    def add_code(
        self, text: str, code_language: CodeLanguageLabel | None, prov: ProvenanceItem | None
    ) -> CodeItem:
        item = self._text(CodeItem, text, prov)
        if code_language:
            item.code_language = code_language
        return item

    def add_formula(self, text: str, prov: ProvenanceItem | None) -> FormulaItem:
        return self._text(FormulaItem, text, prov)

    def add_table(self, data: TableData, prov: ProvenanceItem | None) -> TableItem:
        return self._append(self.doc.tables, "tables", TableItem, None, prov, data=data)

    def add_picture(self, image: ImageRef | None, prov: ProvenanceItem | None) -> PictureItem:
        return self._append(self.doc.pictures, "pictures", PictureItem, None, prov, image=image)


# add_text hands these labels to their own add_* (other item types): left to docling-core
_SPECIAL_TEXT_LABELS = {
    DocItemLabel.TITLE,
    DocItemLabel.LIST_ITEM,
    DocItemLabel.SECTION_HEADER,
    DocItemLabel.CODE,
    DocItemLabel.FORMULA,
    DocItemLabel.FIELD_HEADING,
    DocItemLabel.FIELD_VALUE,
}
