"""openapi.json, the description GET /openapi.json serves, against the code it describes: the
option fields and their types, defaults and choices (hpdparse.serve.documents.options, by the
settings' declarations), every route of routes.document_routes(), the package data that ships
it, and OpenAPI 3.1's own schema where openapi_spec_validator is installed. And the web page's
option controls: each a field of the service with its choices."""

from __future__ import annotations

import fnmatch
import json
import re
from enum import Enum
from importlib import resources

import pytest

from hpdparse.markdown.render import RenderOptions
from hpdparse.serve.documents.options import FIELDS, RENDER_FIELDS
from hpdparse.settings import choices, field_types, value_kind
from tests.helpers.paths import REPO

pytest.importorskip("starlette")

from hpdparse.serve.documents.results import RESULT_FORMATS
from hpdparse.serve.documents.routes import document_routes

PACKAGE = "hpdparse.serve.documents"


@pytest.fixture(scope="module")
def spec() -> dict:
    return json.loads(resources.files(PACKAGE).joinpath("openapi.json").read_text("utf-8"))


def _options(spec: dict) -> dict:
    return spec["components"]["schemas"]["DocumentOptions"]["properties"]


def test_the_option_fields_are_the_services(spec: dict) -> None:
    assert list(_options(spec)) == list(FIELDS)


def test_each_option_has_its_declared_type_default_and_choices(spec: dict) -> None:
    options = _options(spec)
    defaults = RenderOptions()
    hints = field_types(RenderOptions)
    json_types = {bool: "boolean", int: "integer", float: "number", str: "string"}
    for name in RENDER_FIELDS:
        kind = value_kind(hints[name])
        allowed = choices(kind)
        described = options[name]
        default = getattr(defaults, name)
        assert described["default"] == (default.value if isinstance(default, Enum) else default)
        if allowed:
            assert (described["type"], described["enum"]) == ("string", list(allowed)), name
        else:
            assert described["type"] == json_types[kind], name
    assert options["pages"]["type"] == options["password"]["type"] == "string"


def test_every_route_is_described_with_its_methods(spec: dict) -> None:
    routes = document_routes(None)  # type: ignore[arg-type]  # the service is read per request
    described = {(path, method.upper()) for path, item in spec["paths"].items() for method in item}
    served = {
        (route.path, method) for route in routes for method in route.methods if method != "HEAD"
    }
    assert served and served <= described
    assert {path for path, _ in described} == {route.path for route in routes}


def test_the_bodies_and_the_result_formats(spec: dict) -> None:
    upload = spec["paths"]["/v1/documents"]["post"]["requestBody"]["content"]
    assert set(upload) == {"multipart/form-data", "application/json"}
    form = upload["multipart/form-data"]["schema"]["allOf"]
    assert form[0] == {"$ref": "#/components/schemas/DocumentOptions"}
    assert form[1]["properties"]["file"]["type"] == "array"
    url_body = spec["components"]["schemas"]["UrlDocument"]["allOf"][1]
    assert url_body["required"] == ["url"]
    (fmt,) = spec["paths"]["/v1/documents/{id}/result"]["get"]["parameters"]
    assert fmt["schema"]["enum"] == list(RESULT_FORMATS)
    error = spec["components"]["schemas"]["Error"]["properties"]["error"]
    assert {"message", "type", "param", "code"} == set(error["properties"])
    bearer = spec["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert spec["security"] == [{"bearer": []}]
    assert spec["paths"]["/"]["get"]["security"] == []


def test_the_package_ships_the_page_and_the_description() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"][PACKAGE]
    for name in ("openapi.json", "page.html"):
        assert resources.files(PACKAGE).joinpath(name).is_file()
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_it_is_valid_openapi(spec: dict) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)
    assert spec["openapi"].startswith("3.1")


def test_the_pages_option_controls_are_the_services(spec: dict) -> None:
    page = resources.files(PACKAGE).joinpath("page.html").read_text("utf-8")
    options = _options(spec)
    controls = re.findall(r'id="opt-(\w+)"', page)
    assert controls and set(controls) <= set(FIELDS)
    for name, body in re.findall(r'<select id="opt-(\w+)">(.*?)</select>', page, re.DOTALL):
        shown = re.findall(r"<option>(\w+)</option>", body)
        assert sorted(shown) == sorted(options[name]["enum"]), name
        assert shown[0] == options[name]["default"], name  # the first is the one selected
