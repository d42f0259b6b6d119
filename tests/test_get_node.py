"""get_node: one node of the session's head cluster by id, IP or name, as list_nodes shows it, with what to call
next; a node that is not there is an is_error result that says how to find the nodes."""

from __future__ import annotations

from mcp import Client
from tests.support import call_ok, text_of

from ray_mcp.models import Node, NodeList
from ray_mcp.shaping.nodes import node_model, render_node


async def test_get_node_finds_the_head_by_id_ip_and_name_with_its_resources_and_a_next_call(
    client: Client,
) -> None:
    listed = NodeList.model_validate((await call_ok(client, "list_nodes", {})).structured_content)
    head = next(n for n in listed.nodes if n.is_head)
    for given in {head.node_id, head.ip, head.name or head.ip}:
        result = await call_ok(client, "get_node", {"node": given})
        node = Node.model_validate(result.structured_content)
        assert (node.node_id, node.state, node.is_head) == (head.node_id, "ALIVE", True), given
        assert (
            node.resources_total["CPU"] == head.resources_total["CPU"] and "CPU" in node.resources_available
        )
        assert node.usage is not None and node.usage.memory_total, "the head's host use"
        assert node == head.model_copy(update={"usage": node.usage}), "the node as list_nodes shows it"
    text = text_of(result)
    assert text.startswith(f"Node {head.node_id} (head) is ALIVE.") and "CPU" in text, text
    assert f"Hint: list_actors node_id={head.node_id}" in text, text


async def test_get_node_of_a_node_not_in_the_cluster_says_how_to_find_one(client: Client) -> None:
    result = await client.call_tool("get_node", {"node": "10.255.255.1"})
    assert result.is_error and "10.255.255.1" in text_of(result) and "list_nodes" in text_of(result)


def test_a_dead_node_says_why_it_died_and_where_to_look_next() -> None:
    row = {
        "node_id": "e" * 56,
        "node_ip": "10.0.0.9",
        "state": "DEAD",
        "state_message": "health check failed due to missing too many heartbeats",
        "resources_total": {"CPU": 8.0},
    }
    node = node_model(row, {}, None, [])
    text = render_node(node, [])
    assert text.startswith(f"Node {'e' * 56} (worker) is DEAD: ") and "missing too many heartbeats" in text, (
        text
    )
    assert f"Hint: list_events node={'e' * 56}" in text and "state=DEAD" in text, text


def test_an_alive_node_missing_from_the_node_summary_has_its_host_use_unknown_not_empty() -> None:
    row = {"node_id": "f" * 56, "node_ip": "10.0.0.8", "state": "ALIVE", "resources_total": {"CPU": 2.0}}
    notes: list[str] = []
    node = node_model(row, {}, {"a" * 56: {"cpu": 5.0}}, notes)  # the summary was taken before it joined
    assert node.usage is None and notes == [
        f"Host use of node {'f' * 56} unknown: the dashboard's node summary has no entry for it."
    ]
    assert "Note: Host use of node" in render_node(node, notes)
