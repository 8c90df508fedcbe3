"""The ``clearance`` command line."""

from clearance.cli.main import cli, main

__all__ = ["cli", "main"]
