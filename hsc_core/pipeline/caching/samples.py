"""Which images a run covers: a labels CSV or an ImageFolder tree → ``SampleList``.

Everything is checked here, before a model loads: unknown wnids, labels that disagree with their
wnid, duplicate files and images missing from the folder each fail at once with one line. Torch-free.
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...core.validation import clip, clip_path, quote
from ...datasets.imagenet import imagenet_wnids
from .errors import DatasetError

__all__ = [
    "IMAGE_EXTENSIONS",
    "SampleList",
    "describe_dataset",
    "make_synthetic_jpegs",
    "read_image_folder",
    "read_labels_csv",
    "read_samples",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")


@dataclass(frozen=True)
class SampleList:
    """The images to run, in output order.

    Attributes
    ----------
    paths : tuple of Path, length N
        The image files.
    labels : ndarray of int64, shape (N,)
        ImageNet-1k class indices (wnid order).
    sample_ids : tuple of str, length N
        Unique ids saved with the logits (the CSV's ``file``, or ``<wnid>/<file>``).
    sources : tuple of str, length N, or None
        Per-image source (the CSV's ``source`` column); None when there is none.
    name : str
        The data set's name for the manifest (its folder's name, never an absolute path).
    """

    paths: tuple[Path, ...]
    labels: np.ndarray
    sample_ids: tuple[str, ...]
    sources: tuple[str, ...] | None
    name: str

    def __len__(self) -> int:
        return len(self.paths)

    def head(self, n: int) -> SampleList:
        """The first ``n`` samples (for ``--limit``)."""
        return SampleList(self.paths[:n], self.labels[:n], self.sample_ids[:n],
                          None if self.sources is None else self.sources[:n], self.name)


def read_labels_csv(csv_path: str | os.PathLike, images_dir: str | os.PathLike | None = None) -> SampleList:
    """Read a ``file,wnid,label,source`` CSV whose images are in ``images_dir``.

    ``images_dir`` defaults to the ``images/`` folder beside the CSV, else the CSV's folder.
    ``label`` is the ImageNet class index; a row whose wnid disagrees with it is rejected, because
    a shifted label silently ruins every metric. Raises DatasetError (one line) for any bad row.
    """
    csv_path = Path(csv_path)
    if images_dir is None:
        images_dir = csv_path.parent / "images" if (csv_path.parent / "images").is_dir() else csv_path.parent
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise DatasetError(f"images directory {clip_path(images_dir)} not found")
    where = clip_path(csv_path)
    try:
        fields, rows = _read_csv_rows(csv_path)
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise DatasetError(f"{where}: not a readable labels CSV ({type(exc).__name__}: {clip(exc)})") from None
    if "file" not in fields or not ({"label", "wnid"} & fields):
        raise DatasetError(f"{where}: needs columns file and label or wnid, has {quote(sorted(fields))}")
    wnids = imagenet_wnids()
    index = {w: i for i, w in enumerate(wnids)}
    names, labels, sources = [], [], []
    first_line: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        name, label = _parse_row(row, f"{where}:{line}", wnids, index)
        if name in first_line:
            # Sample ids must be unique; finding out only when the file is saved would waste the run.
            raise DatasetError(f"{where}:{line}: {quote(name)} is listed twice (first on line {first_line[name]})")
        first_line[name] = line
        names.append(name)
        labels.append(label)
        sources.append((row.get("source") or "").strip())
    if not names:
        raise DatasetError(f"{where}: no rows")
    paths = [images_dir / name for name in names]
    _check_files_exist(paths, csv_path, images_dir)
    has_sources = "source" in fields and any(sources)
    return SampleList(tuple(paths), np.asarray(labels, dtype=np.int64), tuple(names),
                      tuple(sources) if has_sources else None, csv_path.parent.name)


def _read_csv_rows(csv_path: Path) -> tuple[set[str], list[dict[str, str]]]:
    """(stripped column names, rows with stripped keys); utf-8-sig drops Excel's byte-order mark."""
    with csv_path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        fields = {f.strip() for f in reader.fieldnames or ()}
        rows = [{(k or "").strip(): v for k, v in row.items()} for row in reader]
    return fields, rows


def _parse_row(row: dict[str, str], where: str, wnids: Sequence[str], index: dict[str, int]) -> tuple[str, int]:
    """(file name, class index) of one CSV row; ``where`` is ``<csv>:<line>`` for the messages."""
    wnid = (row.get("wnid") or "").strip()
    raw = (row.get("label") or "").strip()
    try:
        label = int(raw) if raw else index[wnid]
    except (ValueError, KeyError):
        raise DatasetError(f"{where}: bad label {quote(raw)} / wnid {quote(wnid)}") from None
    if not 0 <= label < len(wnids):
        raise DatasetError(f"{where}: label {label} out of range [0, {len(wnids)})")
    if wnid and wnids[label] != wnid:
        raise DatasetError(f"{where}: label {label} is {wnids[label]}, but the row says {clip(wnid)}")
    name = (row.get("file") or "").strip()
    if not name:
        raise DatasetError(f"{where}: empty file name")
    return name, label


def _check_files_exist(paths: list[Path], csv_path: Path, images_dir: Path) -> None:
    # Checked before the model loads: a wrong --images-dir should fail at once, not on the first batch.
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise DatasetError(f"{len(missing)} of {len(paths)} images listed in {clip_path(csv_path)} are not in "
                           f"{clip_path(images_dir)}, e.g. {clip(missing[0].name)}; is --images-dir right?")


def read_image_folder(root: str | os.PathLike) -> SampleList:
    """Read an ImageFolder tree ``root/<wnid>/<image>``; sample ids are ``<wnid>/<file>``."""
    root = Path(root)
    index = {w: i for i, w in enumerate(imagenet_wnids())}
    paths, labels, ids = [], [], []
    for class_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if class_dir.name not in index:
            hint = f"; for a labels CSV pass --data {root / 'labels.csv'}" if (root / "labels.csv").is_file() else ""
            raise DatasetError(f"{clip_path(class_dir)}: folder name is not an ImageNet-1k wnid "
                               f"(expected root/<wnid>/<image>){hint}")
        for f in sorted(class_dir.iterdir()):
            if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS:
                paths.append(f)
                labels.append(index[class_dir.name])
                ids.append(f"{class_dir.name}/{f.name}")
    if not paths:
        raise DatasetError(f"{clip_path(root)}: no images in wnid-named class folders")
    return SampleList(tuple(paths), np.asarray(labels, dtype=np.int64), tuple(ids), None, root.name)


def read_samples(data: str | os.PathLike, images_dir: str | os.PathLike | None = None) -> SampleList:
    """A labels CSV or an ImageFolder directory, by what ``data`` is."""
    data = Path(data)
    if data.is_dir():
        return read_image_folder(data)
    if data.is_file():
        return read_labels_csv(data, images_dir)
    raise DatasetError(f"--data {clip_path(data)} is neither a labels CSV nor an image folder")


def describe_dataset(samples: SampleList) -> dict:
    """The manifest's ``dataset`` entry: name, image count and images per source (no absolute paths)."""
    info: dict = {"name": samples.name, "n_images": len(samples)}
    if samples.sources is not None:
        info["sources"] = dict(sorted(Counter(samples.sources).items()))
    return info


def make_synthetic_jpegs(n: int, directory: str | os.PathLike, size: tuple[int, int] = (500, 375),
                         seed: int = 0) -> Path:
    """Write ``n`` random JPEGs of ``size`` (W, H) and a labels.csv into ``directory``; return the CSV path.

    The default size is ImageNet's typical 500×375. Smooth random noise is used instead of white
    noise so that the files compress and decode like photographs, which keeps the throughput
    benchmark realistic.
    """
    from PIL import Image

    directory = Path(directory)
    (directory / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    wnids = imagenet_wnids()
    w, h = size
    rows = []
    for i in range(n):
        small = rng.integers(0, 256, size=(h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR)
        name = f"synthetic_{i:06d}.JPEG"
        img.save(directory / "images" / name, quality=90)
        label = int(rng.integers(0, len(wnids)))
        rows.append((name, wnids[label], label, "synthetic"))
    csv_path = directory / "labels.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "wnid", "label", "source"])
        writer.writerows(rows)
    return csv_path
