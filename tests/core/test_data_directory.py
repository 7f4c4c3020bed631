"""A data directory is a folder: a file in its place, or in the place of a folder seglog keeps in it, is
refused with one line that names the path, as a SeglogError (not the OS's bare FileExistsError)."""

import pytest

import seglog
from seglog.errors import InvalidArgumentError, SeglogError
from seglog.log import METADATA_FILE


def test_a_file_given_as_the_data_directory_is_refused_naming_it(tmp_path):
    path = tmp_path / "afile"
    path.write_text("not a data directory")
    with pytest.raises(InvalidArgumentError) as refused:
        seglog.open(path)
    message = str(refused.value)
    assert isinstance(refused.value, SeglogError) and "\n" not in message
    assert str(path) in message and "it is a file" in message and "a folder" in message
    assert path.read_text() == "not a data directory"  # nothing written


def test_a_file_above_the_data_directory_is_named(tmp_path):
    blocking = tmp_path / "afile"
    blocking.write_text("")
    with pytest.raises(InvalidArgumentError, match=f"{blocking} is a file, not a folder"):
        seglog.open(blocking / "data")


@pytest.mark.parametrize("folder", ["topics", "subscriptions"])
def test_a_file_where_a_folder_of_the_data_directory_goes_is_named(tmp_path, folder):
    (tmp_path / folder).write_text("")
    with pytest.raises(InvalidArgumentError, match=f"{tmp_path / folder} is a file where the data directory "
                                                   f"keeps its {folder} folder"):
        seglog.open(tmp_path)


def test_a_folder_where_the_metadata_file_goes_is_named(tmp_path):
    (tmp_path / METADATA_FILE).mkdir()
    with pytest.raises(InvalidArgumentError, match=f"{tmp_path / METADATA_FILE} is a folder"):
        seglog.open(tmp_path)


def test_a_missing_data_directory_is_made_with_its_parents(tmp_path):
    with seglog.open(tmp_path / "a" / "b") as log:
        log.create_topic("t")
    assert seglog.is_data_directory(tmp_path / "a" / "b")
