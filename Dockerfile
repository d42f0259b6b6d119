# ray-mcp itself, slim: Python 3.11 and the Ray client libraries at the version pyproject.toml pins
# (tests/test_compose.py checks that RAY_VERSION here, every image tag in docker-compose.yml and the pin agree).
#   docker build -t ray-mcp .
#   docker run --rm -p 127.0.0.1:8270:8270 -e RAY_MCP_AUTH_TOKEN=... -e RAY_ADDRESS=http://ray-head:8265 ray-mcp
ARG RAY_VERSION=2.60.0

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY docs ./docs
COPY prompts ./prompts
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ARG RAY_VERSION
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install "ray[default,serve]==${RAY_VERSION}" /wheels/*.whl && rm -rf /wheels \
    && useradd --create-home --uid 1000 raymcp
USER raymcp
EXPOSE 8270
# Streamable HTTP on every interface of the container: ray-mcp refuses that without RAY_MCP_AUTH_TOKEN.
ENV RAY_MCP_TRANSPORT=streamable-http RAY_MCP_HOST=0.0.0.0 RAY_MCP_PORT=8270
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8270/healthz', timeout=2)"
ENTRYPOINT ["ray-mcp"]
