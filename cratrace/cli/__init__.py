"""The `cratrace` command line: one module per command group (see main.py)."""
