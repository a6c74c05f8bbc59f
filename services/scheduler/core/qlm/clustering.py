"""The two steps of QLM's request-group creation (Algorithm 1), on plain arrays and lists,
plus the feature space they work in and their knobs.

Step (i), `cluster_labels`: k-means over the requests of one (model, SLO class) partition in the
feature space (log1p(input tokens), log1p(predicted mean output tokens)). Step (ii),
`split_halves`: a group larger than `avg_batch_size·δ` is split in half, repeatedly.
`groups.Grouper` owns the queued requests and calls these on index lists and point arrays.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from shared.domain import Request

T = TypeVar("T")

KMEANS_N_INIT = 1
"""k-means runs per fit: one, as the initial centres are given (farthest-first, deterministic);
`random_state` is still the config seed, so nothing depends on global random state."""

FEATURE_DECIMALS = 3
"""Features are rounded to 0.001 (0.1% of a length) before de-duplication, so k-means runs on
distinct points with counts as weights: token counts repeat a lot, this keeps fits small."""


@dataclass(frozen=True, slots=True)
class OutputEstimate:
    """Predicted output length of one request: mean, standard deviation and hard cap, tokens."""

    mean_tokens: float
    std_tokens: float
    max_tokens: int

    def __post_init__(self) -> None:
        if not self.mean_tokens >= 0:
            raise ValueError(f"estimate.mean_tokens must be >= 0, got {self.mean_tokens}")
        if not self.std_tokens >= 0:
            raise ValueError(f"estimate.std_tokens must be >= 0, got {self.std_tokens}")
        if self.max_tokens < 1:
            raise ValueError(f"estimate.max_tokens must be >= 1, got {self.max_tokens}")


Member = tuple[Request, OutputEstimate]


def features(request: Request, estimate: OutputEstimate) -> tuple[float, float]:
    """A request's point in grouping space: (log1p(input tokens), log1p(predicted mean output))."""
    return math.log1p(request.input_tokens), math.log1p(estimate.mean_tokens)


class GroupingConfig(BaseModel):
    """Knobs of QLM request grouping (Algorithm 1 plus incremental assignment)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    delta: int = Field(default=4, ge=1)
    """Split factor δ: a group may hold up to avg_batch_size·δ requests (the paper picks 4)."""
    avg_batch_size: int = Field(default=32, ge=1)
    """Average running batch size of an instance, requests; times δ gives the split threshold."""
    max_k_per_partition: int = Field(default=8, ge=1)
    """Most k-means clusters per (model, SLO class) partition when re-clustering (before splits)."""
    recluster_interval_s: float = Field(default=5.0, ge=0.0)
    """Seconds between periodic re-clusterings (`Grouper.due`)."""
    seed: int = Field(default=0, ge=0, lt=2**32)
    """k-means random_state; grouping is deterministic given it."""
    join_max_distance: float = Field(default=1.4, gt=0.0)
    """Largest Euclidean distance in (log1p input, log1p mean output) space at which an arrival
    joins the nearest group; farther, it opens a new group. Re-clustering uses it as the largest
    cluster radius. Default 1.4 ≈ ln 4: members stay within about a factor 4 of the group's
    typical lengths, which keeps prefill cost (∝ input) and decode length (∝ output) of a group
    within one order of magnitude (ShareGPT lengths span ~3 decades, so a handful of groups per
    axis), while short chat prompts (~100 tokens) and 3-4K-token "mega prompts" (ln ratio ≈ 3.4)
    never share a group."""

    @property
    def split_threshold(self) -> int:
        """avg_batch_size·δ: a group larger than this is split in half (Algorithm 1, line 3)."""
        return self.avg_batch_size * self.delta


@dataclass(frozen=True, slots=True)
class RegroupResult:
    """Group ids that appeared and disappeared (callers add/drop them in the virtual queues)."""

    created: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.created or self.removed)


def split_halves(members: Sequence[T], threshold: int) -> list[list[T]]:
    """Algorithm 1, lines 2-7, applied until no part exceeds `threshold`.

    A part larger than `threshold` becomes its first ceil(n/2) members (the older half, as
    `members` is in FCFS order) and the remaining floor(n/2) (the newer half); halves that are
    still too large are halved again. Order is kept: concatenating the parts gives `members`.
    FCFS halves rather than a cut at the median of a feature: members are already similar in
    features (nearest-centroid joins, k-means), while within one (model, SLO class) partition a
    deadline is arrival + a constant, so FCFS halves give groups with disjoint deadline ranges,
    the finer-grained ordering decision the paper limits group size for (Section 4).
    """
    if threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold}")
    if len(members) <= threshold:
        return [list(members)]
    half = (len(members) + 1) // 2
    return split_halves(members[:half], threshold) + split_halves(members[half:], threshold)


def _farthest_first(
    points: NDArray[np.float64], start: int, radius: float, cap: int
) -> NDArray[np.float64]:
    """Gonzalez' farthest-first traversal from `points[start]`: add the point farthest from the
    centres so far until every point is within `radius` of one, or `cap` centres are taken."""
    centres = [start]
    dist = np.linalg.norm(points - points[start], axis=1)
    while len(centres) < cap and float(dist.max()) > radius:
        far = int(dist.argmax())
        centres.append(far)
        dist = np.minimum(dist, np.linalg.norm(points - points[far], axis=1))
    return points[centres]


@functools.cache
def _thread_pools() -> Any:
    """threadpoolctl's controller, built once (finding the loaded thread pools is slow).

    k-means fits here are tiny: OpenMP threads (one per core by default) only add start-up
    and spin-waiting, which is costly on a loaded machine, so fits run on one thread.
    """
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def cluster_labels(
    points: NDArray[np.float64], *, max_radius: float, max_k: int, seed: int
) -> NDArray[np.intp]:
    """Algorithm 1, line 1: a cluster label per row of `points` (shape (n, 2)), labels 0..k-1.

    The paper does not say how k is chosen. Rule used here: k = 1 when every point lies within
    `max_radius` (the distance within which `Grouper.assign` lets a request join a group) of
    the mean; otherwise k = the number of centres a farthest-first traversal needs to bring
    every point within `max_radius` of one (a 2-approximation of the fewest such balls), capped
    by `max_k` and the number of distinct points; k-means (one Lloyd run, seeded with those
    centres, so one fit per partition and no randomness) then places the boundaries.
    Group *size* is not k-means' job: the split rule caps it afterwards with FCFS halves
    (`split_halves`), so k-means only separates genuinely different length modes (e.g. chat
    prompts vs 3-4K-token "mega prompts") and a homogeneous partition is one cluster, no fit.
    """
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    unique, inverse, counts = np.unique(
        np.round(points, FEATURE_DECIMALS), axis=0, return_inverse=True, return_counts=True
    )
    weights = counts.astype(np.float64)
    mean = np.average(unique, axis=0, weights=weights)
    from_mean = np.linalg.norm(unique - mean, axis=1)
    if min(max_k, len(unique)) <= 1 or float(from_mean.max()) <= max_radius:
        return np.zeros(n, dtype=np.intp)
    # sklearn is imported here, not at module level: it takes seconds to import and most users
    # of groups (and every assign) never need it. Inputs are finite by construction, so its
    # per-call validation (a large share of a small fit's cost) is skipped.
    from sklearn import config_context
    from sklearn.cluster import KMeans

    init = _farthest_first(unique, int(from_mean.argmax()), max_radius, min(max_k, len(unique)))
    fit = KMeans(n_clusters=len(init), init=init, n_init=KMEANS_N_INIT, random_state=seed)
    with (
        _thread_pools().limit(limits=1, user_api="openmp"),
        config_context(assume_finite=True, skip_parameter_validation=True),
    ):
        labels = np.asarray(fit.fit(unique, sample_weight=weights).labels_, dtype=np.intp)
    return labels[inverse.reshape(-1)]


def regroup(
    points: NDArray[np.float64], *, threshold: int, max_radius: float, max_k: int, seed: int
) -> list[list[int]]:
    """Algorithm 1 over one partition whose rows of `points` are in FCFS order.

    Returns parts as ascending row-index lists (so FCFS inside each part): k-means clusters
    (`cluster_labels`) in order of their oldest member, each split by `split_halves`.
    Every row appears in exactly one part.
    """
    clusters: dict[int, list[int]] = {}
    for row, label in enumerate(
        cluster_labels(points, max_radius=max_radius, max_k=max_k, seed=seed).tolist()
    ):
        clusters.setdefault(label, []).append(row)
    return [part for rows in clusters.values() for part in split_halves(rows, threshold)]


def match_previous(
    parts: Sequence[Sequence[str]], old_sizes: Mapping[str, int]
) -> list[str | None]:
    """Per part (given as the old group id of each member), the old group it continues, or None.

    A part continues an old group when that group holds a strict majority of the part and the
    part holds a strict majority of that group's members, so the match is unique both ways.
    Keeping ids then keeps virtual-queue positions stable across a re-clustering that changed
    little.
    """
    matches: list[str | None] = []
    for old_ids in parts:
        counts: dict[str, int] = {}
        for gid in old_ids:
            counts[gid] = counts.get(gid, 0) + 1
        best = max(counts.items(), key=lambda item: item[1], default=None)
        if best is not None and 2 * best[1] > len(old_ids) and 2 * best[1] > old_sizes[best[0]]:
            matches.append(best[0])
        else:
            matches.append(None)
    return matches


def plan_partition(
    points: NDArray[np.float64],
    previous: Sequence[str],
    old_sizes: Mapping[str, int],
    config: GroupingConfig,
) -> tuple[list[list[int]], list[str | None]]:
    """Re-clustering of one partition: `regroup` its rows (FCFS order), then `match_previous`.

    `previous[i]` is the current group id of row i. Returns the parts and, per part, the old
    group id it continues (or None: a new group).
    """
    parts = regroup(
        points,
        threshold=config.split_threshold,
        max_radius=config.join_max_distance,
        max_k=config.max_k_per_partition,
        seed=config.seed,
    )
    return parts, match_previous([[previous[i] for i in part] for part in parts], old_sizes)
