"""`python -m cratrace` is the `cratrace` command."""

from cratrace.cli.entry import main  # installs the signal handlers first

main()
