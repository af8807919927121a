"""The `mirror` command: one module per command group, each parsing its arguments and handing off.

entry.py holds the parser and the boundary every command passes through (logging set-up, one-line
errors, exit codes); the other modules add their commands to it.
"""

from mirror.cli.entry import main

__all__ = ["main"]
