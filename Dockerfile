# Countersign: `countersign run`. Mount /data for the embedded PostgreSQL, or set DATABASE_URL.
# Proven by scripts/prove-image (docs/operations.md, "The Docker image"); run it when this file or uv.lock changes.

# --- build: the virtual environment, exactly as uv.lock pins it ---------------------------------
FROM python:3.11-slim AS build

ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never

RUN pip install --no-cache-dir "uv==0.13.9"
WORKDIR /app

# Dependencies first (cached while only the code changes).
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project

# The project itself, installed into the venv (not editable): the runtime stage needs no source.
COPY bot/ bot/
COPY adapters/ adapters/
COPY countersign/ countersign/
COPY migrations/ migrations/
RUN uv sync --frozen --no-dev --no-editable \
 && rm -f .venv/.lock

# --- runtime: the venv and nothing else ---------------------------------------------------------
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PATH=/app/.venv/bin:$PATH \
    COUNTERSIGN_DATA_DIR=/data \
    PORT=3000

# The runtime user (uid 10001) owns /data only; the code stays root's and read-only to it.
RUN useradd --uid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin countersign \
 && mkdir -p /data \
 && chown countersign:countersign /data

COPY --from=build /app/.venv /app/.venv
WORKDIR /app
USER 10001

VOLUME ["/data"]
EXPOSE 3000
# /healthz is on METRICS_PORT when that is set (it answers during the start's retries too), else on PORT.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
  CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"METRICS_PORT\") or os.environ[\"PORT\"]}/healthz', timeout=4)"

# The process itself receives SIGTERM (no shell, no uv wrapper) and shuts down cleanly.
STOPSIGNAL SIGTERM
CMD ["/app/.venv/bin/countersign", "run"]
