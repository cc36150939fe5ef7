"""`python -m cratrace` is the `cratrace` command."""

from cratrace.cli.main import main

main()
