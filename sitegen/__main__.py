"""``python -m sitegen``."""

from sitegen.cli import run

run()
