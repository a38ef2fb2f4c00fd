"""Code both tatara binaries import: wire keys, models, identity hashes, the controller runtime."""

__version__ = "0.1.0"
