"""Run image classifiers over an image set once and cache their logits (``hsc cache-logits``).

One job per module (torch-free unless marked):

* ``options``: ``CacheOptions``, every setting of a run, validated once.
* ``errors``: ``DatasetError`` (a bad image list) and ``CacheRunError`` (a run that cannot go on).
* ``samples``: a labels CSV or an ImageFolder tree → ``SampleList`` (paths, labels, ids, sources).
* ``store``: the resumable chunks in ``<out>.partial/`` and the final atomic write.
* ``decoding`` (torch): PIL in the DataLoader workers, or JPEG bytes decoded on the device.
* ``runner`` (torch): one model over the samples: load, stream, chunk, manifest, summary.
* ``variants`` (torch): TTA, MC dropout, int8, resolution and corrupted inputs (``CacheOptions`` fields).
* ``ensemble``: the mean of cached models' probabilities (``--ensemble``), no inference.
* ``cli``: the argparse front end; it imports ``runner`` only once the samples are read.

``hsc_core.pipeline.cache_logits`` re-exports the public names, as before the split.
Only the torch-free names are importable from this package itself.
"""

from .errors import CacheRunError, DatasetError
from .options import CacheOptions
from .samples import SampleList, read_samples

__all__ = ["CacheOptions", "CacheRunError", "DatasetError", "SampleList", "read_samples"]
