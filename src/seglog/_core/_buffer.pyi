"""The buffer type the kernels' stubs share: a stub only, no module of this name exists at run time."""

from typing import Any, TypeAlias

import numpy.typing as npt
from typing_extensions import Buffer

# What a kernel reads through a typed memoryview or the buffer protocol: bytes, memoryview, mmap, a Mapping, a
# numpy array. numpy declares ndarray's __buffer__ only for Python 3.12 and later, so its arrays are named too.
BufferLike: TypeAlias = Buffer | npt.NDArray[Any]
