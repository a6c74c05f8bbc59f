"""Named, seeded benchmark scenarios (one registry)."""

from __future__ import annotations

from shared.policy import Registry
from slomesh.bench.scenarios.adapters import many_adapters
from slomesh.bench.scenarios.many_models import many_models
from slomesh.bench.scenarios.others import (
    azure_code,
    azure_conv,
    scls_e2e,
    scls_static,
    scorpio_bursty,
    scorpio_mixed,
    smoke,
    uellm_odbs,
)
from slomesh.bench.scenarios.prefix import shared_prefix
from slomesh.bench.scenarios.qlm import qlm_wa, qlm_wb, qlm_wc
from slomesh.bench.scenarios.spec import ScenarioSpec
from slomesh.bench.scenarios.tenants import bands_overload, tenants_light_alone, tenants_skew
from slomesh.bench.scenarios.uellm import uellm_paper

SCENARIOS: Registry[ScenarioSpec] = Registry(
    "scenario",
    {
        "smoke": smoke,
        "qlm-wa": qlm_wa,
        "qlm-wb": qlm_wb,
        "qlm-wc": qlm_wc,
        "scorpio-mixed": scorpio_mixed,
        "scorpio-bursty": scorpio_bursty,
        "scls-static": scls_static,
        "scls-e2e": scls_e2e,
        "uellm-odbs": uellm_odbs,
        "uellm-paper": uellm_paper,
        "azure-conv": azure_conv,
        "azure-code": azure_code,
        "tenants-skew": tenants_skew,
        "tenants-light-alone": tenants_light_alone,
        "bands-overload": bands_overload,
        "shared-prefix": shared_prefix,
        "many-adapters": many_adapters,
        "many-models": many_models,
    },
)

__all__ = ["SCENARIOS", "ScenarioSpec"]
