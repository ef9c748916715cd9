"""The ``aptix`` command line."""
