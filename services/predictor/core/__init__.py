"""Pure core of the predictor service: output-length distributions, learned online.

`create_predictor("online-histogram", config)` builds the default implementation; every
implementation follows the `LengthPredictor` protocol and is registered by name in `PREDICTORS`.
"""

from services.predictor.core.base import PredictorKind
from services.predictor.core.online_histogram import (
    ONLINE_HISTOGRAM,
    STATE_VERSION,
    OnlineHistogramConfig,
    OnlineHistogramPredictor,
)
from services.predictor.core.priors import (
    SeedPrior,
    SeedPriorName,
    histogram_prior,
    probs_prior,
    seed_prior,
    uniform_prior,
)
from services.predictor.core.registry import PREDICTORS, create_predictor, restore_predictor
from shared.domain.length_distribution import (
    DEFAULT_BUCKET_UPPER_TOKENS,
    LengthDistribution,
    summarize,
)
from shared.domain.length_prediction import LengthPredictor

__all__ = [
    "DEFAULT_BUCKET_UPPER_TOKENS",
    "ONLINE_HISTOGRAM",
    "PREDICTORS",
    "STATE_VERSION",
    "LengthDistribution",
    "LengthPredictor",
    "OnlineHistogramConfig",
    "OnlineHistogramPredictor",
    "PredictorKind",
    "SeedPrior",
    "SeedPriorName",
    "create_predictor",
    "histogram_prior",
    "probs_prior",
    "restore_predictor",
    "seed_prior",
    "summarize",
    "uniform_prior",
]
