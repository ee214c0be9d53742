"""``hsc card``: the decision card (defined with ``hsc guarantees`` in ``guarantees_cli``)."""

from .guarantees_cli import configure_card_parser as configure_parser
from .guarantees_cli import run_card as run

__all__ = ["configure_parser", "run"]
