# Countersign: `countersign run`. Mount /data for the embedded PostgreSQL, or set DATABASE_URL.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    COUNTERSIGN_DATA_DIR=/data \
    PORT=3000

RUN pip install --no-cache-dir "uv==0.13.9" \
 && useradd --create-home --uid 10001 countersign \
 && mkdir -p /data /app \
 && chown countersign:countersign /data /app

WORKDIR /app
USER countersign

# Dependencies first (cached while only the code changes), exactly as uv.lock pins them.
COPY --chown=countersign:countersign pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project

COPY --chown=countersign:countersign . .
RUN uv sync --frozen --no-dev

VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
  CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"PORT\"]}/healthz', timeout=4)"

# The process itself receives SIGTERM (no shell, no uv wrapper) and shuts down cleanly.
STOPSIGNAL SIGTERM
CMD ["/app/.venv/bin/countersign", "run"]
