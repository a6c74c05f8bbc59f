"""The QLM paper's experiments (SoCC'24 §8, Figs. 9-20) as named, seeded bench runs.

`slomesh bench --scenario <name>` runs one: it writes results.json, summary.md and PNG figures
shaped like the paper's into runs/<name> (or --out) and prints the tables. Each experiment lives
in its own module; shared pieces (running stacks, sweeping a stream's rate, tables, figures) are
in `shared.experiments.helpers`.
"""

from __future__ import annotations

from shared.experiments.base import Experiment, ExperimentArgs, ExperimentOutput
from shared.experiments.lengths_prompts import LengthsPrompts
from shared.experiments.qlm_ablation_wa import QLMAblationWA
from shared.experiments.qlm_ablation_wb import QLMAblationWB
from shared.experiments.qlm_delta import QLMDelta
from shared.experiments.qlm_hetero import QLMHetero
from shared.experiments.qlm_rwt import QLMRWT
from shared.experiments.qlm_rwt_live import QLMRWTLive
from shared.experiments.qlm_solver import QLMSolver
from shared.experiments.qlm_wa_rates import QLMWARates
from shared.experiments.qlm_wb_rates import QLMWBRates
from shared.policy import Registry

EXPERIMENTS: Registry[Experiment] = Registry(
    "experiment",
    {
        cls.name: cls
        for cls in (
            QLMWARates,
            QLMWBRates,
            QLMAblationWA,
            QLMAblationWB,
            QLMHetero,
            QLMRWT,
            QLMRWTLive,
            QLMDelta,
            QLMSolver,
            LengthsPrompts,
        )
    },
)

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentArgs", "ExperimentOutput"]
