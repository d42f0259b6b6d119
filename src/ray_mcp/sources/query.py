"""State API requests: filters checked before anything is sent, and encoded into the query string in one place."""

from __future__ import annotations

from collections.abc import Sequence

from ray_mcp.sources.ids import check_id

Filter = tuple[str, str, str]  # (key, predicate, value), as Ray's State API takes them

# Filter keys whose values are Ray ids: checked and lower-cased (Ray prints them lower-case).
ID_KEYS = {
    "job_id": "job",
    "creator_job_id": "job",
    "node_id": "node",
    "actor_id": "actor",
    "placement_group_id": "placement group",
}


def where(**values: str | None) -> list[Filter]:
    """Equality filters for the values given (None or empty: no filter); ids are checked and lower-cased."""
    out = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        value = value.strip()
        if key in ID_KEYS:
            value = check_id(ID_KEYS[key], value.lower())
        out.append((key, "=", value))
    return out


def has(filters: Sequence[Filter], key: str) -> bool:
    return any(k == key for k, _p, _v in filters)


def encode(filters: Sequence[Filter]) -> list[tuple[str, str]]:
    """The query parameters of ``filters`` (``filter_keys``/``filter_predicates``/``filter_values``, in order)."""
    params: list[tuple[str, str]] = []
    for key, predicate, value in filters:
        params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
    return params
