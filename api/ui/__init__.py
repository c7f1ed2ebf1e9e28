"""The dashboard: HTML pages under /ui, served by the API process, whose scripts call only the public
JSON API (/v1) with the browser session's cookie (api/session.py). Every asset ships in this package or
in a Python dependency (Plotly's bundled plotly.min.js), so it works with no internet access."""
