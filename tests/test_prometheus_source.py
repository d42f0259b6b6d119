"""sources/prometheus.py against a real Prometheus scraping the session head (live), and against stand-ins for
what a real one does not do on demand (not live: a slow one, a proxy's login page, a refusal, a redirect).

The stand-ins are loopback ASGI apps (tests.support.serve_asgi): "a Prometheus that is slow", "a proxy that
answers HTML", "a proxy that refuses the credentials", "an answer too large to read".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from tests.prometheus import query
from tests.support import serve_asgi

from ray_mcp.errors import InvalidArgument, PrometheusUnavailable
from ray_mcp.limits import PROMETHEUS_RESPONSE_BYTES, PROMQL_GET_CHARS
from ray_mcp.local_head import free_ports
from ray_mcp.sources.prometheus import Prometheus

SECRET = "prom-token-9c1f0a77e2b54d8e"


def stand_in(handler: Any) -> Starlette:
    return Starlette(routes=[Route("/api/v1/{rest:path}", handler, methods=["GET", "POST"])])


async def test_a_prometheus_that_does_not_answer_in_time_is_unknown_not_slow_forever() -> None:
    async def slow(_request: Request) -> Response:
        await asyncio.sleep(30)
        return JSONResponse({"status": "success", "data": {"resultType": "vector", "result": []}})

    with serve_asgi(stand_in(slow)) as url:
        prom = Prometheus(url, origin="test", timeout_s=0.5)
        with pytest.raises(
            PrometheusUnavailable, match=r"did not answer .* within 0.5 s.*history is unknown"
        ):
            await prom.instant("up")
        await prom.aclose()


async def test_nothing_listening_is_unknown_with_where_to_set_the_url() -> None:
    prom = Prometheus(f"http://127.0.0.1:{free_ports(1)[0]}", origin="test")
    with pytest.raises(PrometheusUnavailable, match=r"Cannot reach Prometheus .*--prometheus"):
        await prom.range_query("up", start=1, end=2, step_s=1)
    assert not await prom.answers()
    await prom.aclose()


async def test_a_proxy_page_or_a_redirect_is_not_taken_for_a_prometheus() -> None:
    async def login(_request: Request) -> Response:
        return HTMLResponse("<html>Sign in</html>")

    async def elsewhere(_request: Request) -> Response:
        return RedirectResponse("http://example.com/steal")

    for app, said in (
        (stand_in(login), "without Prometheus's JSON envelope"),
        (stand_in(elsewhere), "HTTP 307"),
    ):
        with serve_asgi(app) as url:
            prom = Prometheus(url, origin="test")
            with pytest.raises(PrometheusUnavailable, match=said):
                await prom.instant("up")
            await prom.aclose()


async def test_refused_credentials_are_named_without_quoting_the_answer() -> None:
    async def refuse(_request: Request) -> Response:
        return Response(f"bad token {SECRET}", status_code=401)

    with serve_asgi(stand_in(refuse)) as url:
        prom = Prometheus(url, origin="test", headers=[("Authorization", f"Bearer {SECRET}")])
        with pytest.raises(PrometheusUnavailable, match="RAY_PROMETHEUS_HEADERS") as caught:
            await prom.instant("up")
        assert SECRET not in str(caught.value)
        await prom.aclose()


async def test_an_answer_too_large_to_read_is_refused_with_how_to_narrow_it() -> None:
    async def huge(_request: Request) -> Response:
        async def chunks() -> Any:
            yield b'{"status":"success","data":{"resultType":"matrix","result":['
            for _ in range(PROMETHEUS_RESPONSE_BYTES // 1_048_576 + 1):
                yield b" " * 1_048_576

        return StreamingResponse(chunks(), media_type="application/json")

    with serve_asgi(stand_in(huge)) as url:
        prom = Prometheus(url, origin="test")
        with pytest.raises(InvalidArgument, match=r"more than 32 MB: narrow it"):
            await prom.range_query("up", start=1, end=2, step_s=1)
        await prom.aclose()


async def test_a_long_query_goes_as_a_post_form() -> None:
    methods: list[str] = []

    async def record(request: Request) -> Response:
        methods.append(request.method)
        form = await request.form() if request.method == "POST" else request.query_params
        assert str(form["query"]).startswith("sum(")
        return JSONResponse({"status": "success", "data": {"resultType": "vector", "result": []}})

    with serve_asgi(stand_in(record)) as url:
        prom = Prometheus(url, origin="test")
        await prom.instant("sum(up)")
        await prom.instant("sum(" + " + ".join(["up"] * (PROMQL_GET_CHARS // 4)) + ")")
        await prom.aclose()
    assert methods == ["GET", "POST"]


# -- a real Prometheus ------------------------------------------------------------------------------------


@pytest.mark.live
async def test_the_source_reads_what_prometheus_answers_raw(prometheus: str) -> None:
    prom = Prometheus(prometheus, origin="test")
    try:
        names = await prom.label_values("__name__")
        assert {"ray_node_cpu_utilization", "ray_node_mem_used_host", "ray_resources"} <= set(names)
        raw = query(prometheus, "count(ray_node_cpu_count)")
        samples = await prom.instant("count(ray_node_cpu_count)", at=float(raw[0]["value"][0]))
        assert samples[0].value == float(raw[0]["value"][1])
        end = float(raw[0]["value"][0])
        result = await prom.range_query("ray_node_cpu_count", start=end - 60, end=end, step_s=5)
        raw_range = query(prometheus, "ray_node_cpu_count", start=end - 60, end=end, step=5)
        assert [s.points for s in result.series] == [
            [(float(t), float(v)) for t, v in r["values"]] for r in raw_range
        ]
        assert [s.labels for s in result.series] == [r["metric"] for r in raw_range]
        listed = await prom.series(["ray_node_cpu_count"], start=end - 60, end=end)
        assert {s["instance"] for s in listed} == {r["metric"]["instance"] for r in raw_range}
        long = "max(" + " or ".join(["ray_node_cpu_count"] * (PROMQL_GET_CHARS // 20)) + ")"
        assert (await prom.instant(long, at=end))[0].value == max(
            float(r["values"][-1][1]) for r in raw_range
        )
    finally:
        await prom.aclose()


@pytest.mark.live
async def test_a_promql_syntax_error_is_the_callers_with_prometheus_own_words(prometheus: str) -> None:
    prom = Prometheus(prometheus, origin="test")
    with pytest.raises(InvalidArgument, match=r"cannot parse .*parse error"):
        await prom.range_query("sum(rate(ray_tasks[1m]", start=1, end=60, step_s=5)
    await prom.aclose()
