"""Errors are one line for the user and carry the path they are about as an attribute."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from hpdparse.errors import EngineError, HpdparseError, InputError
from hpdparse.sources.discover import discover_inputs
from hpdparse.sources.open import open_source


def test_the_path_is_an_attribute_and_the_message_is_unchanged() -> None:
    error = InputError("a:b.pdf: no such file", path="a:b.pdf")
    assert str(error) == "a:b.pdf: no such file" and error.path == "a:b.pdf"
    assert InputError("x", path=Path("/in/x.pdf")).path == "/in/x.pdf"
    assert HpdparseError("no file involved").path is None and EngineError("down").path is None
    copy = pickle.loads(pickle.dumps(error))  # errors cross process boundaries
    assert type(copy) is InputError and str(copy) == str(error) and copy.path == "a:b.pdf"


def test_input_errors_name_their_file(tmp_path: Path) -> None:
    spec = str(tmp_path / "x:y" / "*.pdf")
    _, [error] = discover_inputs([spec])
    assert error.path == spec and str(error).startswith(f"{spec}: ")
    text = tmp_path / "notes:1.pdf"
    text.write_text("not a PDF")
    with pytest.raises(InputError) as info:
        open_source(text)
    assert info.value.path == str(text) and str(info.value).startswith(f"{text}: ")
