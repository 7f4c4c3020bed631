"""The data directory as a folder on disk: made if missing, and refused with one line naming the path when
a file stands where it, or a folder seglog keeps in it, should be (the OS's bare FileExistsError or
NotADirectoryError would name neither what was expected nor which path is wrong)."""

from __future__ import annotations

from pathlib import Path

from seglog.errors import InvalidArgumentError

# The folders a data directory holds (broker.py describes the layout); each is made when first needed.
FOLDERS = ("topics", "subscriptions")
ACCEPTED = "a folder (made if missing): a seglog data directory is a folder, not a file"


def make_data_directory(path: Path, metadata_file: str) -> None:
    """Make `path` (and its parents) a folder if it is not one, after checking that no file stands in the
    way: not at `path` or above it, nor at its topics/ or subscriptions/ folders, and that `metadata_file`
    in it, if present, is a file. InvalidArgumentError('data directory', path, ...) otherwise."""
    blocking = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocking == path:
        raise _refused(path, "it is a file")
    if blocking is not None:
        raise _refused(path, f"{blocking} is a file, not a folder")
    for folder in FOLDERS:
        if (path / folder).exists() and not (path / folder).is_dir():
            raise _refused(path, f"{path / folder} is a file where the data directory keeps its {folder} folder")
    metadata = path / metadata_file
    if metadata.is_dir():
        raise InvalidArgumentError("data directory", str(path), f"a folder whose {metadata_file}, if any, is a file "
                                   "(seglog's metadata database)", detail=f"{metadata} is a folder")
    path.mkdir(parents=True, exist_ok=True)


def _refused(path: Path, detail: str) -> InvalidArgumentError:
    return InvalidArgumentError("data directory", str(path), ACCEPTED, detail=detail)
