"""The API renders JSON with orjson (infrastructure/renderers.py), byte-for-byte what DRF's own
JSONRenderer would have meant: the same values after parsing, for every type the API sends."""

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings

from infrastructure.renderers import OrjsonRenderer

VALUES = {
    "utc": dt.datetime(2026, 11, 23, 9, 30, 1, 250000, tzinfo=dt.UTC),
    "offset": dt.datetime(2026, 11, 23, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    "naive": dt.datetime(2026, 11, 23, 9, 30),
    "date": dt.date(2026, 11, 23),
    "time": dt.time(9, 30, 5),
    "duration": dt.timedelta(minutes=90),
    "decimal": Decimal("1.25"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "lazy": gettext_lazy("Not found."),
    "int_keys": {1: "one", 2: "two"},
    "nested": [{"a": None, "b": True, "c": 1.5, "d": "naïve – ünïcode"}],
    "set_like": (1, 2, 3),
}


@pytest.mark.parametrize("name", VALUES)
def test_each_value_renders_as_drf_renders_it(name):
    data = {name: VALUES[name]}
    ours = OrjsonRenderer().render(data, "application/json")
    drf = JSONRenderer().render(data, "application/json")
    assert json.loads(ours) == json.loads(drf)


def test_utf8_is_written_as_is_not_escaped():
    assert OrjsonRenderer().render({"d": "ünï"}, "application/json") == '{"d":"ünï"}'.encode()


def test_no_data_renders_an_empty_body():
    assert OrjsonRenderer().render(None, "application/json") == b""


def test_an_indent_asked_for_in_accept_is_honoured():
    body = OrjsonRenderer().render({"a": [1]}, "application/json; indent=4")
    assert body.decode() == '{\n    "a": [\n        1\n    ]\n}'


def test_the_api_renders_with_it(demo, org_client):
    assert api_settings.DEFAULT_RENDERER_CLASSES[0] is OrjsonRenderer
    response = org_client(demo).get("/api/roster")
    assert response.status_code == 200
    assert isinstance(response.accepted_renderer, OrjsonRenderer)
    assert response["Content-Type"] == "application/json"
