"""The differential conformance suite in the mesh tier: every corpus case sent to bare vLLM
(started here with the engine arguments of the live mesh's vLLM replica) and to the mesh's
front door answers the same, bodies compared after removing ids, timestamps and fingerprints."""

from __future__ import annotations

from typing import Any

import pytest

from slomesh.cli.conformance import reference_server, vllm_replica_args
from slomesh.conformance.corpus import corpus
from slomesh.conformance.run import run, table

pytestmark = pytest.mark.mesh

REFERENCE_PORT = 8311


def test_every_case_answers_as_bare_vllm(live_mesh: dict[str, Any]) -> None:
    replica = vllm_replica_args(live_mesh["config"])
    front_door = live_mesh["openai"].removesuffix("/v1")
    cases = corpus(replica["model"])
    assert len(cases) >= 80
    with reference_server(replica, REFERENCE_PORT) as reference:
        rows = run(cases, reference, front_door)
    differing = [r for r in rows if not r.same]
    assert not differing, table(differing)
    # the corpus reaches vLLM's own errors, not only successes
    assert {r.reference.status for r in rows} >= {200, 400, 404}
