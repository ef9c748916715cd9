"""``python -m aptix`` runs the CLI."""

from aptix.cli.main import main

main()
