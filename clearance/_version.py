"""The package's version, in a module of its own: the runtime names it (telemetry, the
gateway, ``clearance --version``) without importing the package's re-exports."""

__version__ = "0.1.0"
