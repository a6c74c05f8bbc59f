"""Feature rows of completions waiting for the next `partial_fit` pass (predictor.py).

A prediction computes its feature rows a batch at a time (`FeatureBlocks`); a completion's row
is one row of such a batch. Slicing a row out of the sparse blocks and stacking it into one
matrix costs more than the prediction itself when done per completion (scipy's per-call
overhead), so the pending rows are kept as references (the batch's blocks, the row's index) and
stacked once per pass: each batch's matrix once, then every pending row picked in its order.
The matrix is the one stacking the rows one by one gives, value for value.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from services.predictor.core.learned.features import FeatureBlocks


class PendingRows:
    def __init__(self) -> None:
        self._refs: list[tuple[FeatureBlocks | sp.csr_matrix, int]] = []

    def add(self, blocks: FeatureBlocks | sp.csr_matrix, index: int) -> None:
        """Row `index` of a batch's blocks (or of a CSR matrix: rows read from a model file)."""
        self._refs.append((blocks, index))

    def __len__(self) -> int:
        return len(self._refs)

    def clear(self) -> None:
        self._refs = []

    def matrix(self) -> sp.csr_matrix:
        """The pending rows, in the order added, as one CSR matrix (at least one row)."""
        if not self._refs:
            raise ValueError("no pending rows")
        offsets: dict[int, int] = {}
        parts: list[sp.csr_matrix] = []
        height = 0
        for source, _ in self._refs:
            if id(source) not in offsets:
                part = source.matrix() if isinstance(source, FeatureBlocks) else source.tocsr()
                offsets[id(source)] = height
                parts.append(part)
                height += part.shape[0]
        stacked = sp.vstack(parts, format="csr", dtype=np.float64)
        rows = np.fromiter((offsets[id(s)] + i for s, i in self._refs), dtype=np.int64)
        out: sp.csr_matrix = stacked[rows]
        return out
