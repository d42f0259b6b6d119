"""Every answer at default limits stays within 8 KB as a client receives it (text and structured content, each
as escaped JSON), whatever the text it carries: quotes and backslashes take 2 bytes there, control and invisible
characters (shown escaped) 5 to 7. Lists leave out their last items and say so; logs their oldest lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from tests.support import call_ok, submit, text_of, wait_until

from ray_mcp.limits import RESPONSE_BUDGET_BYTES, RESULT_ENVELOPE_BYTES
from ray_mcp.models import Actor, ActorList
from ray_mcp.shaping.actors import render_actor_list
from ray_mcp.shaping.common import fit_page, json_bytes, sent_escaped_bytes

NASTY = st.text(st.sampled_from(['"', "\\", "\x01", "\x1b", "\u200b", "\x85", "é", "a", " "]), max_size=300)


def as_sent(result) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


@settings(max_examples=60, deadline=None)
@given(names=st.lists(NASTY, min_size=1, max_size=60))
def test_a_list_of_escape_heavy_rows_keeps_the_most_that_fit_and_says_how_many_it_left_out(
    names: list[str],
) -> None:
    actors = [
        Actor(actor_id=f"{i:032x}", class_name=name, name=name, state="ALIVE", job_id="01000000")
        for i, name in enumerate(names)
    ]
    page = ActorList(total=len(actors), matched=len(actors), shown=len(actors), actors=actors)
    fitted, text = fit_page(page, render_actor_list)
    sent = sent_escaped_bytes(fitted.model_dump(mode="json", exclude_none=True), text)
    assert sent <= RESPONSE_BUDGET_BYTES or fitted.shown == 1
    assert fitted.actors == actors[: fitted.shown] and fitted.shown == len(fitted.actors)
    if fitted.shown < len(actors):
        note = f"{len(actors) - fitted.shown} more of these {len(actors)} actors left out"
        assert note in fitted.notes[-1] and note in text
        one_more = fitted.shown + 1  # the most that fit: one more, with its own note, does not
        note = fitted.notes[-1].replace(
            f"{len(actors) - fitted.shown} more", f"{len(actors) - one_more} more"
        )
        over = page.model_copy(update={"actors": actors[:one_more], "shown": one_more, "notes": [note]})
        assert sent_escaped_bytes(
            over.model_dump(mode="json", exclude_none=True), render_actor_list(over)
        ) > (RESPONSE_BUDGET_BYTES)


async def test_jobs_with_escape_heavy_entrypoints_list_within_8_kb_as_sent(client: Client) -> None:
    nasty = '\u200b\x01\\"' * 60
    jobs = [await submit(client, entrypoint=f"echo '{nasty}' {i}") for i in range(8)]
    for job in jobs:
        await wait_until(client, job, {"SUCCEEDED", "FAILED"})
    result = await call_ok(client, "list_jobs", {"entrypoint_contains": nasty[:8]})
    assert as_sent(result) <= RESPONSE_BUDGET_BYTES
    structured = result.structured_content or {}
    assert structured["matching"] >= 8 and 1 <= structured["shown"] < 8
    assert "left out to keep the whole answer under 8 KB" in text_of(result)


async def test_the_envelope_of_a_result_is_within_what_the_budgets_allow_for_it(client: Client) -> None:
    for name, args in [("list_nodes", {}), ("cluster_status", {}), ("list_jobs", {"limit": 1})]:
        result = await call_ok(client, name, args)
        links = [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content[1:]]
        content = json_bytes(text_of(result)) + json_bytes(result.structured_content) + json_bytes(links)
        envelope = as_sent(result) - content  # resource links are budgeted at the edge (fit_page reserve)
        assert 0 < envelope <= RESULT_ENVELOPE_BYTES, (name, envelope)
