"""The "learned" length predictor: an ordinal SGD model over prompt, metadata and tenant history.

Prediction: a request (and its prompt, when shared) becomes one feature row (features.py, with the
history features of its tenant and model); the ordinal model (ordinal.py) gives bucket
probabilities; `summarize` turns them, with the per-bucket centres learned from the training data,
into a LengthDistribution capped at max_tokens. Without a prompt the row has no text part and its
no-prompt flag set (the model was trained on such rows too).

Online learning (drift), in two speeds:

- every completion updates the tenant history at once (decayed means, history.py), so a tenant's
  or model's shift shows in the next prediction;
- completions are buffered into mini-batches of `online_batch_size`; each full batch (or what
  is buffered when `learn_pending` is called) is one `partial_fit` pass of every threshold
  classifier with a constant step `online_learning_rate` (constant steps forget old data
  geometrically, which is what follows drift);
- every completion also updates the online layer (online_layer.py, `online_layer.enabled`): a
  residual shift of the prior's distribution in log length, fitted by recursive least squares on
  compact features plus a memory of similar prompts already answered; it moves within a few
  hundred completions where the SGD steps take thousands, and starts at no shift.
  observe() gets no prompt, so the feature row a request was predicted with is kept by request_id
  (the `feature_cache_size` most recent) and reused; otherwise the prompt-less row is learned.

`version` is "learned:<model_id>+<online observations>": model_id names the trained weights; the
count changes with every observation (each one changes later predictions).
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from services.predictor.core.learned import codec
from services.predictor.core.learned.conformal import (
    ConformalConfig,
    OnlineConformal,
    p90_misses,
    warp_probs,
)
from services.predictor.core.learned.features import FeatureBlocks, FeatureConfig, Featurizer
from services.predictor.core.learned.history import LengthHistory
from services.predictor.core.learned.online_layer import OnlineLayer, OnlineLayerConfig, shift_probs
from services.predictor.core.learned.ordinal import OrdinalSGD
from services.predictor.core.learned.pending import PendingRows
from shared.domain import Request
from shared.domain.length_distribution import (
    LengthDistribution,
    bucket_index,
    check_bucket_bounds,
    summarize,
)

STATE_VERSION = 1
"""Version of the state() layout; from_state refuses any other."""


class LearnedConfig(BaseModel):
    """Run-time knobs of the learned predictor (the trained model itself comes from a file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    model_path: str | None = None
    """Model file (.npz) to load (services/predictor/model_store.py); None: the shipped default."""

    online_batch_size: int = Field(default=32, ge=1)
    """Completions per online partial_fit mini-batch."""

    online_learning_rate: float = Field(default=0.05, gt=0.0)
    """Constant SGD step of online updates (larger: follows drift faster, noisier)."""

    feature_cache_size: int = Field(default=10_000, ge=0)
    """Predicted requests whose feature rows are kept (by request_id) for their observe()."""

    online_layer: OnlineLayerConfig = OnlineLayerConfig()
    """The online recalibration layer (online_layer.py): a fast residual shift of the prior."""

    conformal: ConformalConfig = ConformalConfig()
    """Online p90 calibration per model (conformal.py): a stretch around the median tracking
    the share of completions above the predicted p90."""


@dataclass(frozen=True, eq=False)
class _Seen:
    """What a prediction kept for its observe(): the feature row (row `index` of its batch's
    `blocks`), the layer's inputs and the bucket probabilities served (for the p90 miss)."""

    blocks: FeatureBlocks
    index: int
    z: NDArray[np.float64] | None
    folded: NDArray[np.float32] | None
    prior_log_mean: float
    probs: NDArray[np.float64]


class LearnedPredictor:
    """Ordinal SGD over hashed prompt n-grams, metadata and tenant history (module docstring)."""

    name = "learned"

    def __init__(
        self,
        features: FeatureConfig,
        bucket_upper_tokens: Sequence[int],
        centres: NDArray[np.float64],
        ordinal: OrdinalSGD,
        history: LengthHistory,
        model_id: str,
        info: Mapping[str, Any] | None = None,
        config: LearnedConfig | None = None,
    ) -> None:
        check_bucket_bounds(bucket_upper_tokens)
        self.upper = tuple(int(b) for b in bucket_upper_tokens)
        if centres.shape != (len(self.upper),) or ordinal.n_buckets != len(self.upper):
            raise ValueError(
                "learned predictor: centres and ordinal model need one entry per bucket"
            )
        if ordinal.n_features != features.n_features:
            raise ValueError("learned predictor: ordinal model width differs from the features")
        self.features = features
        self.featurizer = Featurizer(features)
        self.centres = np.asarray(centres, dtype=np.float64)
        self.ordinal = ordinal
        self.history = history
        self.model_id = model_id
        self.info: dict[str, Any] = dict(info or {})
        self.config = config or LearnedConfig()
        self._observations = 0
        self.online_batches = 0
        self._pending_rows = PendingRows()
        self._pending_buckets: list[int] = []
        self._cache: OrderedDict[str, _Seen] = OrderedDict()
        layer = self.config.online_layer
        self.layer = OnlineLayer(layer, features.dense_features) if layer.enabled else None
        conformal = self.config.conformal
        self.conformal = OnlineConformal(conformal) if conformal.enabled else None

    # --- prediction -------------------------------------------------------------------------

    @property
    def version(self) -> str:
        return f"learned:{self.model_id}+{self._observations}"

    @property
    def observations(self) -> int:
        return self._observations

    def rows(self, requests: Sequence[Request], prompts: Sequence[str | None]) -> FeatureBlocks:
        """Feature rows of requests (with the current tenant history)."""
        hist = self.history.features([r.tenant for r in requests], [r.model for r in requests])
        return self.featurizer.blocks(
            prompts,
            [r.model for r in requests],
            [r.slo.class_name for r in requests],
            [r.input_tokens for r in requests],
            hist,
        )

    def bucket_probs(self, rows: FeatureBlocks) -> NDArray[np.float64]:
        """n x buckets probabilities of feature rows."""
        w, b = self.ordinal.weights()
        return self.ordinal.probs_from_logits(rows.dot(w) + b)

    def predict(self, request: Request, prompt: str | None = None) -> LengthDistribution:
        """Output-length distribution of `request`, capped by request.max_tokens."""
        return self.predict_batch([request], [prompt])[0]

    def predict_batch(
        self, requests: Sequence[Request], prompts: Sequence[str | None] | None = None
    ) -> list[LengthDistribution]:
        """predict() for many requests at once (one matrix product; much faster per request)."""
        if prompts is None:
            prompts = [None] * len(requests)
        if len(prompts) != len(requests):
            raise ValueError("predict_batch: requests and prompts differ in length")
        if not requests:
            return []
        rows = self.rows(requests, prompts)
        probs, seen = self._layered_probs(rows, [r.model for r in requests])
        if self.config.feature_cache_size > 0:
            for r, s in zip(requests, seen, strict=True):
                self._remember(r.request_id, s)
        version = self.version
        return [
            summarize(self.upper, probs[i], self.centres, r.max_tokens, version)
            for i, r in enumerate(requests)
        ]

    def _layered_probs(
        self, rows: FeatureBlocks, models: Sequence[str]
    ) -> tuple[NDArray[np.float64], list[_Seen]]:
        """Bucket probabilities (the prior's, shifted by the online layer, stretched by the
        per-model p90 calibration) and what each row's observe() needs."""
        probs = self.bucket_probs(rows)
        # row by row (not a BLAS gemv, whose rounding depends on the batch size): a batch
        # predicts and learns exactly what one-at-a-time calls do
        log_mean = (probs * np.log(self.centres)).sum(axis=1)
        n = probs.shape[0]
        z: NDArray[np.float64] | None = None
        folded: NDArray[np.float32] | None = None
        if self.layer is not None:
            folded = self.layer.fold(rows.text)
            z = self.layer.inputs(rows.dense, models, log_mean, folded)
            delta = self.layer.shift(z)
            if delta.any():
                probs = np.maximum(shift_probs(self.upper, probs, delta), self.ordinal.min_prob)
                probs /= probs.sum(axis=1, keepdims=True)
        if self.conformal is not None:
            probs = warp_probs(
                self.upper, probs, np.asarray([self.conformal.scale(m) for m in models])
            )
        seen = [
            _Seen(
                rows,
                i,
                None if z is None else z[i],
                None if folded is None else folded[i],
                float(log_mean[i]),
                probs[i],
            )
            for i in range(n)
        ]
        return probs, seen

    def _remember(self, request_id: str, row: _Seen) -> None:
        self._cache[request_id] = row
        self._cache.move_to_end(request_id)
        while len(self._cache) > self.config.feature_cache_size:
            self._cache.popitem(last=False)

    # --- online learning --------------------------------------------------------------------

    def observe(self, request: Request, output_tokens: int) -> None:
        """Learn that `request` produced `output_tokens` (>= 1) tokens (module docstring)."""
        if isinstance(output_tokens, bool) or not isinstance(output_tokens, int | np.integer):
            raise ValueError(f"output_tokens must be an int, got {output_tokens!r}")
        if output_tokens < 1:
            raise ValueError(f"output_tokens must be >= 1, got {output_tokens}")
        seen = self._cache.pop(request.request_id, None)
        if seen is None:
            seen = self._layered_probs(self.rows([request], [None]), [request.model])[1][0]
        if self.layer is not None and seen.z is not None and seen.folded is not None:
            residual = float(np.log(output_tokens)) - seen.prior_log_mean
            self.layer.observe(seen.z, seen.folded, residual)
        if self.conformal is not None:
            y = np.asarray([float(output_tokens)])
            missed = p90_misses(self.upper, seen.probs[None, :], self.centres, y)
            self.conformal.observe(request.model, bool(missed[0]))
        self._pending_rows.add(seen.blocks, seen.index)
        self._pending_buckets.append(bucket_index(self.upper, int(output_tokens)))
        self.history.observe(request.tenant, request.model, int(output_tokens))
        self._observations += 1
        if len(self._pending_rows) >= self.config.online_batch_size:
            self.learn_pending()

    @property
    def pending(self) -> int:
        """Completions buffered for the next partial_fit pass."""
        return len(self._pending_rows)

    def learn_pending(self) -> int:
        """One partial_fit pass over the completions buffered so far, however few (the live
        service runs it on a timer: services/predictor/deployment.py); the completions learned
        (0: none were buffered)."""
        n = len(self._pending_rows)
        if n == 0:
            return 0
        x = self._pending_rows.matrix()
        y = np.asarray(self._pending_buckets, dtype=np.int64)
        self.ordinal.partial_fit(
            x, y, learning_rate="constant", eta0=self.config.online_learning_rate
        )
        self._pending_rows.clear()
        self._pending_buckets = []
        self.online_batches += 1
        return n

    # --- persistence ------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """JSON-able description: model id, version, features, buckets, history, training info."""
        return {
            "kind": self.name,
            "model_id": self.model_id,
            "version": self.version,
            "online_observations": self._observations,
            "online_batches": self.online_batches,
            "features": self.features.model_dump(mode="json"),
            "bucket_upper_tokens": list(self.upper),
            "bucket_centres_tokens": self.centres.tolist(),
            "alpha": self.ordinal.alpha,
            "seed": self.ordinal.seed,
            "min_prob": self.ordinal.min_prob,
            "temperature": self.ordinal.temperature,
            "history": self.history.to_dict(),
            "conformal": None if self.conformal is None else self.conformal.to_dict(),
            "info": self.info,
        }

    def to_bytes(self) -> bytes:
        """The model file (codec.py) of this predictor, with online updates and pending batch."""
        arrays: dict[str, NDArray[np.generic]] = dict(self.ordinal.arrays())
        if self.layer is not None:
            arrays.update(self.layer.arrays())
        pending = self._pending_rows.matrix() if len(self._pending_rows) else None
        if pending is not None:
            arrays["pending_data"] = pending.data
            arrays["pending_indices"] = pending.indices.astype(np.int64)
            arrays["pending_indptr"] = pending.indptr.astype(np.int64)
            arrays["pending_buckets"] = np.asarray(self._pending_buckets, dtype=np.int64)
        return codec.encode(arrays, self.metadata())

    @classmethod
    def from_bytes(cls, data: bytes, config: LearnedConfig | None = None) -> LearnedPredictor:
        """Rebuild from a model file's bytes (to_bytes); `config` sets the run-time knobs."""
        arrays, meta = codec.decode(data)
        if meta.get("kind") != cls.name:
            raise ValueError(f"model file: kind must be '{cls.name}', got {meta.get('kind')!r}")
        features = FeatureConfig.model_validate(meta["features"])
        upper = [int(b) for b in meta["bucket_upper_tokens"]]
        ordinal = OrdinalSGD(
            len(upper),
            features.n_features,
            float(meta["alpha"]),
            int(meta["seed"]),
            float(meta["min_prob"]),
        )
        ordinal.load_arrays(arrays)
        ordinal.temperature = float(meta["temperature"])
        p = cls(
            features,
            upper,
            np.asarray(meta["bucket_centres_tokens"], dtype=np.float64),
            ordinal,
            LengthHistory.from_dict(meta["history"]),
            str(meta["model_id"]),
            meta.get("info") or {},
            config,
        )
        p._observations = int(meta["online_observations"])
        p.online_batches = int(meta["online_batches"])
        if "pending_buckets" in arrays:
            buckets = np.asarray(arrays["pending_buckets"], dtype=np.int64)
            x = sp.csr_matrix(
                (arrays["pending_data"], arrays["pending_indices"], arrays["pending_indptr"]),
                shape=(len(buckets), features.n_features),
            )
            for i in range(len(buckets)):
                p._pending_rows.add(x, i)
            p._pending_buckets = [int(b) for b in buckets]
        if p.layer is not None and "layer_w" in arrays:
            p.layer.load_arrays(arrays)
        fresh = meta.get("format_version", 0) >= 4  # earlier files: no stretch learned yet
        if p.conformal is not None and fresh and isinstance(meta.get("conformal"), dict):
            p.conformal.load_dict(meta["conformal"])
        return p

    def state(self) -> dict[str, Any]:
        """JSON-able snapshot: metadata, run-time config and the model file (base64)."""
        return {
            "kind": self.name,
            "state_version": STATE_VERSION,
            "version": self.version,
            "config": self.config.model_dump(mode="json"),
            "metadata": self.metadata(),
            "model_npz_base64": base64.b64encode(self.to_bytes()).decode("ascii"),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> LearnedPredictor:
        """Rebuild from state(); refuses another kind or state version."""
        if state.get("kind") != cls.name:
            raise ValueError(f"state.kind must be '{cls.name}', got {state.get('kind')!r}")
        if state.get("state_version") != STATE_VERSION:
            raise ValueError(
                f"state.state_version must be {STATE_VERSION}, got {state.get('state_version')!r}"
            )
        config = LearnedConfig.model_validate(state.get("config") or {})
        return cls.from_bytes(base64.b64decode(state["model_npz_base64"]), config)
