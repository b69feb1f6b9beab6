"""The web server's settings: gunicorn reads ./gunicorn.conf.py by itself, so docker-compose.yml
and the Dockerfile run plain ``gunicorn proactweb.wsgi:application`` with these, and
bench/annotation_next.py measures the server with the same file (its ``--bind`` wins)."""

from proactweb.env import env_int

bind = "0.0.0.0:8000"
# WEB_CONCURRENCY is gunicorn's own variable for the number of workers, read by its default;
# a number written here would silently win over it, so it is read here too. 3 suits 2 cores
# with PostgreSQL on the same machine: 5 were no better there (bench/README.md). Sizing a
# bigger host: README.md, "Sizing the web server".
workers = env_int("WEB_CONCURRENCY", 3, minimum=1)
# Sync workers: each takes one request at a time, on a connection the first free worker
# accepts, so the load spreads over all of them. gthread workers keep a client's connection
# alive on the worker that accepted it: under the annotation benchmark's closed loop one or two
# of three workers then served every request while the others sat idle (bench/README.md).
worker_class = "sync"
# The app, URLconf included, is imported once before the fork: no worker's first request pays
# for importing it, and the workers share its pages.
preload_app = True
timeout = 120
