"""The planner owns the requests and KV; the engine core is handed it and only times its plans."""

from __future__ import annotations

import pytest

from services.replica.core.continuous import ContinuousPlanner
from services.replica.core.engine_core import SimEngineCore, step_time_s
from services.replica.core.outputs import MixedStep, PaddedDecode, PaddedPrefill, StepKind
from services.replica.core.planner_factory import make_planner
from services.replica.core.scorpio_planner import ScorpioPlanner
from services.replica.core.static import StaticPlanner
from shared.domain.engine import EngineConfig
from shared.domain.scorpio import ScorpioConfig


@pytest.mark.parametrize(
    ("config", "cls"),
    [
        (EngineConfig(), ContinuousPlanner),
        (EngineConfig(mode="static"), StaticPlanner),
        (EngineConfig(scorpio=ScorpioConfig()), ScorpioPlanner),
    ],
)
def test_factory_gives_each_config_its_planner_with_an_empty_state(h, config, cls):
    planner = make_planner(config, {"m": h.profile()})
    assert type(planner) is cls
    state = planner.state
    assert not state.has_work and state.seqs == {} and state.model is None
    assert state.pool.num_blocks == 1  # no model loaded yet


def test_scorpio_planner_needs_a_scorpio_config(h):
    with pytest.raises(ValueError, match="scorpio"):
        ScorpioPlanner(EngineConfig(), {"m": h.profile()})


def test_engine_core_takes_the_planner_it_is_handed(h):
    profiles = {"m": h.profile(1024)}
    config = EngineConfig(block_size_tokens=16)
    planner = StaticPlanner(config, profiles)  # any planner, not the one the factory would pick
    core = SimEngineCore("x", profiles, config, planner, "m")
    assert core.planner is planner
    assert planner.state.model == "m" and planner.state.pool.num_blocks == 1024 // 16
    with pytest.raises(ValueError, match="another config or models"):
        SimEngineCore("y", profiles, EngineConfig(max_num_seqs=2), make_planner(config, profiles))
    with pytest.raises(ValueError, match="another config or models"):
        SimEngineCore("z", {"m2": h.profile(model="m2")}, config, planner)


def test_a_planner_plans_without_an_engine_and_the_core_times_the_plan(h):
    profile = h.profile(4096)
    config = EngineConfig()
    planner = make_planner(config, {"m": profile})
    planner.state.load_model("m")
    planner.state.add(h.request("a", 100, 3), 0.0)
    plan = planner.schedule(0.0)
    assert plan.kind is StepKind.EXECUTE and plan.duration_s == 0.0  # the planner does not time
    assert plan.work == MixedStep(100, 1, 100, 0, 0, prefill_attention=100 * 100)
    assert [(c.seq.request_id, c.num_tokens) for c in plan.chunks] == [("a", 100)]
    assert step_time_s(profile, plan.work) == profile.step_time_s(100, 1, 100, 0, 0)
    plan.duration_s = step_time_s(profile, plan.work)
    result = planner.update(plan)
    assert [s.request_id for s in result.emitted] == ["a"]
    assert planner.state.outstanding_out == 2


def test_step_time_of_each_work_shape(h):
    profile = h.profile()
    assert step_time_s(profile, PaddedPrefill(3, 30)) == profile.prefill_time_s(3, 30)
    assert step_time_s(profile, PaddedDecode(31, 3)) == profile.decode_time_s(31, 3)
    mixed = MixedStep(50, 2, 40, 3, 300)
    assert step_time_s(profile, mixed) == profile.step_time_s(50, 2, 40, 3, 300)


def test_load_model_plans_are_timed_from_the_tiers(h):
    a, b = h.profile(model="A"), h.profile(model="B", weight_bytes=4 * 10**9)
    core = h.core(profiles={"A": a, "B": b}, active="A")
    core.add_request(h.request("r", 10, 2, model="B"), 0.0)
    plan = core.schedule(0.0)
    assert plan.kind is StepKind.LOAD_MODEL and plan.load_model == "B" and plan.work is None
    assert plan.duration_s == core.tiers.load_time_s("B") == pytest.approx(4.0)  # cold: 1e9 B/s
    core.update(plan)
    assert core.tiers.active == "B" == core.planner.state.model and core.model_swaps == 1
