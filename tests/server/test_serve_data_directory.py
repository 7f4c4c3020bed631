"""`seglog serve --data PATH` where PATH is a file: refused as seglog.open refuses it, naming the path."""

import pytest

from seglog.errors import InvalidArgumentError
from seglog.server.app import lock_data_directory


def test_serving_a_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "afile"
    path.write_text("")
    with pytest.raises(InvalidArgumentError, match=f"invalid data directory '{path}': it is a file; accepted: "
                                                   "a folder"):
        lock_data_directory(path)
