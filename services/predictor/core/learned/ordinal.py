"""Ordinal bucket classifier: one online logistic regression per bucket bound (Frank & Hall).

For buckets with upper bounds u_0 < ... < u_{K-1}, threshold classifier k (k < K-1) models the
survival S_k(x) = P(length > u_k | x) with an sklearn SGDClassifier (log_loss, L2, learned with
`partial_fit`, so training and online updates are the same operation). Bucket probabilities are
differences of the survival curve: P_0 = 1 − S_0, P_k = S_{k-1} − S_k, P_{K-1} = S_{K-2}; the
curve is made non-increasing (running minimum) and every bucket gets at least `min_prob` before
renormalising. A temperature T divides every logit (calibration, fitted on a validation split).

Coefficients are kept rounded to float32 after every fit so that a saved (float32) model predicts
exactly like the one in memory.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from sklearn.linear_model import SGDClassifier

_CLASSES = np.asarray([0, 1])


class OrdinalSGD:
    """K − 1 threshold classifiers over a fixed feature width (module docstring)."""

    def __init__(
        self, n_buckets: int, n_features: int, alpha: float, seed: int, min_prob: float = 1e-4
    ) -> None:
        if n_buckets < 2:
            raise ValueError("ordinal model needs at least 2 buckets")
        self.n_buckets = n_buckets
        self.n_features = n_features
        self.alpha = float(alpha)
        self.seed = int(seed)
        self.min_prob = float(min_prob)
        self.temperature = 1.0
        self.clfs = [self._new(k) for k in range(n_buckets - 1)]
        self._w: NDArray[np.float64] | None = None
        self._b: NDArray[np.float64] | None = None

    def _new(self, k: int) -> SGDClassifier:
        return SGDClassifier(
            loss="log_loss",
            penalty="l2",
            alpha=self.alpha,
            learning_rate="optimal",
            shuffle=False,
            random_state=self.seed + k,
        )

    @property
    def fitted(self) -> bool:
        return hasattr(self.clfs[0], "coef_")

    def partial_fit(
        self,
        x: sp.csr_matrix,
        bucket: NDArray[np.int64],
        learning_rate: str = "optimal",
        eta0: float = 0.01,
    ) -> None:
        """One SGD pass over (x, bucket) for every threshold, in the given row order.

        learning_rate "optimal" (training) or "constant" (online, step eta0).
        """
        if x.shape[1] != self.n_features:
            raise ValueError(
                f"ordinal model: rows have {x.shape[1]} features, want {self.n_features}"
            )
        for k, clf in enumerate(self.clfs):
            clf.set_params(learning_rate=learning_rate, eta0=eta0)
            clf.partial_fit(x, (bucket > k).astype(np.int64), classes=_CLASSES)
            clf.coef_ = clf.coef_.astype(np.float32).astype(np.float64)
            clf.intercept_ = clf.intercept_.astype(np.float32).astype(np.float64)
        self._w = self._b = None

    def weights(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(row width x (K − 1) coefficients, K − 1 intercepts), cached until the next fit."""
        if not self.fitted:
            raise ValueError("ordinal model is not fitted")
        if self._w is None or self._b is None:
            self._w = np.ascontiguousarray(np.vstack([c.coef_ for c in self.clfs]).T)
            self._b = np.concatenate([c.intercept_ for c in self.clfs])
        return self._w, self._b

    def logits(self, x: sp.csr_matrix) -> NDArray[np.float64]:
        """n x (K − 1) threshold logits, before the temperature."""
        w, b = self.weights()
        return np.asarray(x @ w) + b

    def probs_from_logits(
        self, logits: NDArray[np.float64], temperature: float | None = None
    ) -> NDArray[np.float64]:
        """n x K bucket probabilities from threshold logits."""
        t = self.temperature if temperature is None else temperature
        surv = 1.0 / (1.0 + np.exp(-np.clip(logits / t, -50.0, 50.0)))
        surv = np.minimum.accumulate(surv, axis=1)
        n = surv.shape[0]
        cdf = np.hstack([np.zeros((n, 1)), 1.0 - surv, np.ones((n, 1))])
        p = np.maximum(np.diff(cdf, axis=1), self.min_prob)
        out: NDArray[np.float64] = p / p.sum(axis=1, keepdims=True)
        return out

    def probs(self, x: sp.csr_matrix) -> NDArray[np.float64]:
        """n x K bucket probabilities."""
        return self.probs_from_logits(self.logits(x))

    def arrays(self) -> dict[str, NDArray[np.generic]]:
        """Coefficients (float32), intercepts and SGD step counters, for the model file."""
        w, b = self.weights()
        return {
            "coef": w.T.astype(np.float32),
            "intercept": b.astype(np.float32),
            "sgd_t": np.asarray([c.t_ for c in self.clfs], dtype=np.float64),
        }

    def load_arrays(self, arrays: Mapping[str, NDArray[np.generic]]) -> None:
        """Restore fitted threshold classifiers from `arrays()` output (partial_fit continues)."""
        coef = np.asarray(arrays["coef"], dtype=np.float64)
        intercept = np.asarray(arrays["intercept"], dtype=np.float64)
        sgd_t = np.asarray(arrays["sgd_t"], dtype=np.float64)
        k = self.n_buckets - 1
        if coef.shape != (k, self.n_features) or intercept.shape != (k,) or sgd_t.shape != (k,):
            raise ValueError(
                f"model file: coef must be {k} x {self.n_features}, intercept and sgd_t {k} long"
            )
        if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
            raise ValueError("model file: coefficients must be finite")
        self.clfs = []
        for i in range(k):
            clf = self._new(i)
            clf.classes_ = _CLASSES.copy()
            clf.coef_ = np.ascontiguousarray(coef[i : i + 1])
            clf.intercept_ = intercept[i : i + 1].copy()
            clf.n_features_in_ = self.n_features
            clf.t_ = float(sgd_t[i])
            self.clfs.append(clf)
        self._w = self._b = None
