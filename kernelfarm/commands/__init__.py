"""CLI command groups, mounted by kernelfarm/cli.py."""
