"""``hsc card``: the decision card (defined with ``hsc guarantees`` in ``cli.guarantees``)."""

from .guarantees import configure_card_parser as configure_parser
from .guarantees import run_card as run

__all__ = ["configure_parser", "run"]
