"""Statistics, the researcher dashboard, the REST API and exports.

``compute/`` holds the statistics as pure functions on arrays; ``interfaces.py`` the plain-data
inputs of the annotation-based ones; ``selectors.py`` fetches from the ORM and ``tables.py``
turns results into the tables that the dashboard, the API and ``export_stats`` all serve.
"""
