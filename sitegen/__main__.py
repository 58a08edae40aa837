"""``python -m sitegen``."""
from .cli import run

run()
