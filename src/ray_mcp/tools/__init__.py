"""MCP tools, one module per area. Each module has ``register(server)`` and thin tool bodies."""

from mcp.types import ToolAnnotations

from ray_mcp.ray_api.ids import check_id

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)


def state_filters(**values: str | None) -> list[tuple[str, str, str]]:
    """State API filters (key = value) for the arguments that were given; ids are checked and lower-cased."""

    kinds = {"job_id": "job", "node_id": "node", "actor_id": "actor", "placement_group_id": "placement group"}
    out = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        value = value.strip()
        if key in kinds:
            value = check_id(kinds[key], value.lower())
        out.append((key, "=", value))
    return out
