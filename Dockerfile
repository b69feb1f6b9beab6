# One image for web and worker (docker-compose.yml picks the command).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PROACTWEB_VAR_DIR=/var/lib/proactweb
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY proactweb ./proactweb
COPY benchmark ./benchmark
COPY annotation ./annotation
RUN pip install --no-cache-dir -c constraints.txt .
COPY . .
RUN SECRET_KEY=build-only python manage.py collectstatic --no-input -v0 \
    && useradd --system --home /app proactweb && mkdir -p /var/lib/proactweb \
    && chown proactweb /var/lib/proactweb
USER proactweb
EXPOSE 8000
# gunicorn reads its settings from ./gunicorn.conf.py (WORKDIR /app).
CMD ["gunicorn", "proactweb.wsgi:application"]
