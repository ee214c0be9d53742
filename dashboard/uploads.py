"""Files a user adds in the browser: checking an uploaded logits file or data set, and keeping it for
this session only (never on disk beyond a parse, never in a cache another session can reach)."""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from hsc_core import config
from hsc_core.core.hierarchy import LIMITS, file_too_large
from hsc_core.core.validation import bounded_message, clip, quote
from hsc_core.datasets.formats import HIERARCHY_SUFFIXES, load_hierarchy_with_notes
from hsc_core.datasets.logits_io import LogitsBundle, load_logits_bytes
from hsc_core.datasets.registry import Dataset, dataset_for_manifest

from .catalog import SESSION_PREFIX, UPLOAD_PREFIX, DataError, dataset_catalog, get_dataset, max_upload_bytes
from .session_memory import _this_session

MAX_UPLOAD_ENV = config.MAX_UPLOAD_MB
DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class AddedDataset:
    name: str
    location: str  # "session:<token>": the catalog entry of a data set kept in session state
    dataset: Dataset
    notes: tuple[str, ...] = ()  # what the reader assumed (e.g. a CSV's first row taken as column names)


def add_session_dataset(name: str, filename: str, hierarchy: bytes, classes: bytes | None = None,
                        header: bool | None = None) -> AddedDataset:
    """Parse an uploaded hierarchy (+ class list) with the library. The bytes go to a temporary
    folder that is deleted as soon as they are parsed; only the parsed data set is returned, for
    the caller to keep in session state. A file the library rejects raises DataError (one line:
    a file over the hierarchy size limits is refused before it is written or parsed).

    header : whether a CSV file's first row is column names (None: detected; what detection
    assumed comes back in ``notes``)."""
    name = name.strip()
    if not DATASET_NAME.fullmatch(name):
        raise DataError("a data set name is 1–64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    if name in dataset_catalog():
        raise DataError(f"there is already a data set called {name!r}")
    suffix = Path(filename).suffix.lower()
    if suffix not in HIERARCHY_SUFFIXES:
        raise DataError(f"{clip(Path(filename).name)}: a hierarchy file ends in {', '.join(HIERARCHY_SUFFIXES)}")
    for upload in (hierarchy, classes):
        if upload is not None and len(upload) > LIMITS.max_file_bytes:
            raise DataError(f"{clip(Path(filename).name) if upload is hierarchy else 'the class list'}: "
                            f"{file_too_large(len(upload))}")
    # The readers take paths, so the upload spends a moment on disk; the folder never outlives this call.
    with tempfile.TemporaryDirectory(prefix="hsc_upload_") as tmp:
        tree_file, class_file = Path(tmp) / f"hierarchy{suffix}", Path(tmp) / "classes.txt"
        tree_file.write_bytes(hierarchy)
        if classes is not None:
            class_file.write_bytes(classes)
        def public(text: str) -> str:  # messages name the file as uploaded, never the temp folder
            text = text.replace(str(tree_file), clip(Path(filename).name)).replace(str(class_file), "the class list")
            return text.replace(str(tmp) + os.sep, "").replace(str(tmp), "")

        try:
            tree, notes = load_hierarchy_with_notes(tree_file, class_file if classes is not None else None,
                                                    header=header)
        except Exception as exc:  # any reader error on untrusted input: report it without the temp path
            raise DataError(bounded_message(public(str(exc)))) from None
        notes = [public(n) for n in notes]
    ds = Dataset(name, tree, tuple(tree.names[: tree.n_leaves]),
                 f"{tree.n_leaves} classes uploaded in this session", None)
    return AddedDataset(name, f"{SESSION_PREFIX}{uuid.uuid4().hex}", ds, tuple(notes))



def validate_upload(data: bytes, name: str) -> LogitsBundle:
    """Check an uploaded ``.npz`` in memory (nothing is written to disk): headers against sizes and
    the ``max_upload_bytes()`` cap before inflating, then every check of ``load_logits``, and the
    data set its class count implies. Messages name the file as the user did."""
    bundle = load_logits_bytes(data, name, max_bytes=max_upload_bytes())
    ds_name = dataset_for_manifest(bundle.manifest, bundle.n_classes)
    if ds_name is not None:
        ds = get_dataset(ds_name)
        if ds.hierarchy.n_leaves != bundle.n_classes:
            raise DataError(f"{clip(name)}: the logits have {bundle.n_classes} classes but data set {quote(ds_name)} "
                            f"has {ds.hierarchy.n_leaves}")
    return bundle


def keep_upload(bundle: LogitsBundle, source=None) -> str:
    """Keep a validated upload in this session's state, released when the session disconnects
    (``_release_uploads``), with ``source`` (the uploaded file, whose bytes Streamlit's widget state
    keeps) closed then; its location."""
    location = f"{UPLOAD_PREFIX}{uuid.uuid4().hex}/{bundle.name}"
    uploads = _this_session()
    if uploads is None:
        raise DataError("uploads need a browser session")
    uploads.bundles[location] = bundle
    if source is not None:
        uploads.files.add(source)
    return location


#: Where a stream uploaded on the Monitor page is kept among this session's uploads (one at a time):
#: this prefix and the upload's file id.
STREAM_LOCATION = f"{UPLOAD_PREFIX}monitor-stream/"


def session_stream(up) -> LogitsBundle | None:
    """The stream file uploaded on the Monitor page (``st.file_uploader``'s file or None), validated once
    per upload like every logits upload (bounded before inflating) and kept in this session only (the
    previous stream is let go); None when none is uploaded. A bad file raises ``DataError`` in one line."""
    uploads = _this_session()
    if uploads is None:
        return None
    location = None if up is None else f"{STREAM_LOCATION}{up.file_id}"
    for old in [k for k in uploads.bundles if k.startswith(STREAM_LOCATION) and k != location]:
        del uploads.bundles[old]
    if up is None:
        return None
    if location in uploads.bundles:
        return uploads.bundles[location]
    if Path(up.name).suffix.lower() != ".npz":
        raise DataError(f"a stream is a .npz archive of logits in arrival order, not a "
                        f"{Path(up.name).suffix or 'suffix-less'} file")
    bundle = validate_upload(up.getvalue(), up.name)
    uploads.bundles[location] = bundle
    uploads.files.add(up)
    return bundle
