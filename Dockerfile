# One image for web and worker (docker-compose.yml picks the command).
# PYTHON_IMAGE: any Debian-based Python 3.11 image with `python` and `pip` on PATH, e.g. one from
# your registry mirror, or the stand-in that deploy/offline/ builds without a registry.
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}
# Behind a package mirror: --build-arg PIP_INDEX_URL=… (for uv itself) and UV_DEFAULT_INDEX=….
ARG PIP_INDEX_URL UV_DEFAULT_INDEX
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PROACTWEB_VAR_DIR=/var/lib/proactweb
WORKDIR /app
# The dependencies alone first, from pyproject.toml pinned by constraints.txt, so this layer is
# rebuilt only when those two change, not on every change to the code. uv (pinned in
# constraints.txt, as in the Makefile) fetches and unpacks the wheels in parallel; it is removed
# afterwards. --compile-bytecode: PYTHONDONTWRITEBYTECODE keeps no .pyc at run time, so without
# it every web and worker process would compile its ~2,400 imports again at each start.
COPY pyproject.toml constraints.txt ./
RUN pip install --no-cache-dir --no-compile -c constraints.txt uv \
    && uv pip install --no-cache --compile-bytecode --python "$(command -v python)" \
        -c constraints.txt -r pyproject.toml \
    && pip uninstall --yes uv
# The code runs from /app (manage.py, gunicorn and celery all start here), so it is not installed.
COPY . .
RUN SECRET_KEY=build-only python manage.py collectstatic --no-input -v0 \
    && useradd --system --create-home proactweb && mkdir -p /var/lib/proactweb \
    && chown proactweb /var/lib/proactweb
USER proactweb
EXPOSE 8000
# gunicorn reads its settings from ./gunicorn.conf.py (WORKDIR /app). The user's home (not
# /app, which it may not write) holds gunicorn's control socket, ~/.gunicorn/gunicorn.ctl.
CMD ["gunicorn", "proactweb.wsgi:application"]
