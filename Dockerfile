# syntax=docker/dockerfile:1
# The service's one image (docs/operations.md, "Deploying"): `python -m config.serve` by default;
# the Celery worker, beat and the migrations run it with another command (deploy/compose.yaml,
# deploy/k8s/). Built from the repository's root: `docker build -t agent-org .`
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# The dependencies, into a virtualenv of their own (pyproject.toml pins them; the project's own
# code is not a package: it runs from /app).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml ./
RUN /opt/venv/bin/pip install .

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VAR_DIR=/app/var \
    HOST=0.0.0.0 \
    PORT=8000
RUN groupadd --system --gid 10001 agentorg \
    && useradd --system --uid 10001 --gid agentorg --home-dir /app --shell /usr/sbin/nologin agentorg
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
# The code belongs to root and is only read by the service; var/ (the static files) is its own.
COPY . /app
RUN python -m compileall -q /app \
    && mkdir -p /app/var && chown agentorg:agentorg /app/var
USER 10001:10001
# The admin's and the API docs' static files, served by WhiteNoise from var/static. The key is a
# throwaway: collectstatic signs nothing, and the image holds no secret.
RUN SECRET_KEY=collectstatic-only-not-a-secret python manage.py collectstatic --noinput -v 0
EXPOSE 8000
STOPSIGNAL SIGTERM
CMD ["python", "-m", "config.serve"]
