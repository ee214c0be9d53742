"""``hsc cache-logits``: run models over images and cache their logits (``pipeline.caching``).

The caching package keeps its own front end (``pipeline.caching.cli``, also behind
``python -m hsc_core.pipeline.cache_logits``): its options describe the run (models, images,
device, variants) and share no argument group with the evaluation commands. Importing this module
loads no torch: the models are loaded when the run starts.
"""

from __future__ import annotations

from ..pipeline.caching.cli import configure_parser, run

__all__ = ["configure_parser", "run"]
