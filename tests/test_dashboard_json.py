"""Dashboard answers decode to exactly what json.loads gives, faster, and what is not JSON is refused the same way."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_mcp.sources.dashboard import decode_json

# Whatever Python's json writes (the dashboard is Python): any text, lone surrogates included, any numbers.
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=values, ensure_ascii=st.booleans())
def test_a_dashboard_answer_decodes_to_what_json_loads_gives(value: object, ensure_ascii: bool) -> None:
    body = json.dumps(value, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    assert decode_json(body) == json.loads(body)


@pytest.mark.parametrize("body", [b"", b"<html>502 Bad Gateway</html>", b'{"a": ', b"\xff\xfe"])
def test_an_answer_that_is_not_json_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_json(body)
