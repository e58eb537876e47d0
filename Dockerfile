# syntax=docker/dockerfile:1
# The frontdesk worker image, after LiveKit's agent templates (agent-starter-python):
# a slim Python base, an unprivileged user, the package installed with pip, the plugins'
# files fetched at build time (`frontdesk download-files`), and `frontdesk start` as the command.
# Build: docker build -t frontdesk .   Run: docker run --env-file .env frontdesk
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# An unprivileged user, as the templates create (uid 10001).
ARG UID=10001
RUN adduser --disabled-password --gecos "" --home /app --shell /sbin/nologin --uid "${UID}" appuser

# Build tools for any dependency without a wheel for this platform.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc g++ python3-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY core ./core
COPY agents ./agents
COPY db ./db
COPY migrations ./migrations
COPY plugins ./plugins
RUN pip install .

# Reports and the ack cache are written at run time; the cache can be a shared volume.
ENV FRONTDESK_CACHE_PATH=/app/cache \
    FRONTDESK_REPORTS_PATH=/app/reports
RUN mkdir -p /app/cache /app/reports && chown -R appuser:appuser /app
USER appuser

# Fetch model files the configured plugins need now, not on the first call. Provider
# variables given with --build-arg are not needed: the plugins' files do not depend on keys.
RUN frontdesk download-files

# The health endpoint LiveKit's worker serves in start mode.
EXPOSE 8081
CMD ["frontdesk", "start"]
