"""The address table (ray_mcp/addresses.py): every row reads its own samples and refuses its malformed ones, and
everything that names the forms reads them from the table (help, messages, server.json)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from tests.npm_tools import REPO

from ray_mcp.addresses import ADDRESS_FORMS, FORMS, SERVER_JSON_ADDRESS, form_of, parse_address, read_address
from ray_mcp.errors import InvalidArgument

SAMPLES = [(form.kind, sample) for form in FORMS for sample in form.samples]
REFUSED = [(form.kind, bad) for form in FORMS for bad in form.refused]


@pytest.mark.parametrize(("kind", "address"), SAMPLES, ids=[s for _, s in SAMPLES])
def test_each_rows_samples_are_read_by_that_row(kind: str, address: str) -> None:
    form, read = read_address(address)
    assert (form.kind, read.kind) == (kind, kind)
    assert form_of(address) is form


DASHBOARDS = [sample for kind, sample in SAMPLES if kind == "dashboard"]


@pytest.mark.parametrize("address", DASHBOARDS)
def test_each_dashboard_sample_names_a_url_the_http_client_can_reach(address: str) -> None:
    # cluster.py sends its requests to this URL as it is: a row of kind "dashboard" whose reader leaves it unset
    # or keeps its own scheme (ray+https) would name nothing httpx can reach
    read = parse_address(address)
    assert read.url is not None, address
    url = urlsplit(read.url)
    assert url.scheme in ("http", "https") and url.hostname == read.host.strip("[]"), (address, read)
    assert url.port == read.port and not read.url.endswith("/"), (address, read)


@pytest.mark.parametrize(("kind", "address"), REFUSED, ids=[s for _, s in REFUSED])
def test_each_rows_malformed_addresses_are_refused_with_the_form_expected(kind: str, address: str) -> None:
    with pytest.raises(InvalidArgument, match=r"Example|expected|must|empty|scheme") as refused:
        read_address(address)
    assert address in str(refused.value) or repr(address) in str(refused.value), str(refused.value)
    assert form_of(address) is None


def test_every_row_is_named_in_the_forms_every_message_gives() -> None:
    assert all(form.words in ADDRESS_FORMS for form in FORMS)
    assert len({form.words for form in FORMS}) == len(FORMS)


def test_server_json_lists_every_address_form_of_the_table() -> None:
    server = json.loads((REPO / "server.json").read_text())
    (address,) = [a for a in server["packages"][0]["packageArguments"] if a["name"] == "--address"]
    assert address["description"] == SERVER_JSON_ADDRESS


def test_the_help_text_names_every_form() -> None:
    from ray_mcp.cli import _parser

    (address,) = [a for a in _parser()._actions if "--address" in a.option_strings]
    assert all(form.words in str(address.help) for form in FORMS)
