"""Pending feature rows (services/predictor/core/learned/pending.py): kept as references to
their batch's blocks and stacked once per learning pass, they give the matrix that slicing and
stacking each row on its own gives, value for value, in the order the completions came."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from services.predictor.core.learned.features import FeatureConfig, Featurizer
from services.predictor.core.learned.pending import PendingRows

FEATURIZER = Featurizer(FeatureConfig(text_hash_bits=10, category_hash_bits=6))


def _batch(prompts: list[str | None], model: str = "m1"):  # type: ignore[no-untyped-def]
    n = len(prompts)
    history = np.linspace(0.0, 1.0, 3 * n).reshape(n, 3)
    return FEATURIZER.blocks(
        prompts, [model] * n, ["chat"] * n, [12 + k for k in range(n)], history
    )


A = _batch(["write a poem about bees", None, "yes or no: is tea hot?"])
B = _batch(["summarise the ocean", "list three castles"], model="m2")
FILE_ROWS = sp.csr_matrix(A.matrix()[[2, 0]])  # rows read back from a model file

CASES = [
    # (the rows added, in order: (source, index))
    [(A, 0)],
    [(A, 2), (A, 0), (A, 1)],
    [(B, 1), (A, 0), (B, 0), (A, 2)],  # batches interleaved as completions come
    [(A, 1), (A, 1)],
    [(FILE_ROWS, 1), (B, 0), (FILE_ROWS, 0)],
]


def _one_by_one(refs: list) -> sp.csr_matrix:  # type: ignore[type-arg]
    rows = [s.row(i).matrix() if hasattr(s, "row") else s[i] for s, i in refs]
    return sp.vstack(rows, format="csr")


@pytest.mark.parametrize("refs", CASES)
def test_the_pass_matrix_is_the_rows_stacked_one_by_one(refs: list) -> None:  # type: ignore[type-arg]
    pending = PendingRows()
    for source, index in refs:
        pending.add(source, index)
    assert len(pending) == len(refs)
    got, want = pending.matrix(), _one_by_one(refs)
    assert got.shape == want.shape
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data)


def test_cleared_rows_are_gone() -> None:
    pending = PendingRows()
    pending.add(A, 0)
    pending.clear()
    assert len(pending) == 0
    with pytest.raises(ValueError, match="no pending rows"):
        pending.matrix()
