"""Pages for a person, not the model: URL-mode elicitation asks the user's client to open them.

The model gets each URL in the answer's text too (a URL is not the page), and whether the user opened it. A
client that did not declare URL elicitation, or a user who declines, costs nothing: the call still answers,
with the links to hand on. The two protocol eras ask differently:

* up to 2025-11-25, an ``elicitation/create`` request (``mode: "url"``, with an elicitation id) during the call;
* from 2026-07-28, an ``InputRequiredResult`` whose input requests are the URL elicitations (no id); the client
  retries the call with the answers under the same keys, and the tool answers then. The SDK's ``Resolve``
  asks in form mode only, so a tool that shows pages drives this round itself and takes no ``Resolve``
  parameter (the SDK allows one input channel per call).
"""

from __future__ import annotations

import uuid
from typing import Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from mcp_types import ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least

from ray_mcp.answers.pages import JobPages, Page

INPUT_REQUIRED_VERSION = "2026-07-28"  # the first revision that elicits through InputRequiredResult


def can_open_urls(ctx: Context[Any, Any]) -> bool:
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def _ask(page: Page) -> str:
    return f"ray-mcp asks you to look at {page.title} (for you, not the model): {page.url}"


async def show_pages(
    ctx: Context[Any, Any], found: JobPages, answer: CallToolResult
) -> CallToolResult | InputRequiredResult:
    """Ask the user's client to open ``found``'s pages, then ``answer`` with a line per page appended."""
    outcomes: dict[str, str]
    if not can_open_urls(ctx):
        outcomes = {}
    elif ctx.protocol_version and is_version_at_least(ctx.protocol_version, INPUT_REQUIRED_VERSION):
        responses = ctx.input_responses or {}
        if not responses:
            requests = {
                p.key: ElicitRequest(params=ElicitRequestURLParams(mode="url", message=_ask(p), url=p.url))
                for p in found.pages
            }
            return InputRequiredResult(input_requests=requests)  # type: ignore[arg-type]
        outcomes = {
            p.key: r.action for p in found.pages if isinstance(r := responses.get(p.key), ElicitResult)
        }
    else:
        outcomes = {}
        for p in found.pages:
            result = await ctx.elicit_url(_ask(p), p.url, elicitation_id=uuid.uuid4().hex)
            outcomes[p.key] = result.action
    lines = [_line(p, outcomes.get(p.key), asked=can_open_urls(ctx)) for p in found.pages]
    if found.note:
        lines.append(found.note)
    answer.content.insert(1, TextContent(type="text", text="\n".join(lines)))
    return answer


def _line(page: Page, action: str | None, *, asked: bool) -> str:
    if action == "accept":
        return f"Opened for the user: {page.title}: {page.url}"
    if action in ("decline", "cancel"):
        did = "declined" if action == "decline" else "dismissed"
        return f"The user {did} opening {page.title}; give them the link if they ask: {page.url}"
    why = "the client gave no answer" if asked else "this client cannot open pages (no URL elicitation)"
    return f"Not shown ({why}); give the user the link to {page.title}: {page.url}"
