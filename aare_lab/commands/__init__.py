"""Subcommands of the ``aare-lab`` CLI; each module has ``register(subparsers)``."""
