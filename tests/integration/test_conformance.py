"""The differential conformance suite in the mesh tier: every corpus case sent to bare vLLM
(started here with the engine arguments of the live mesh's vLLM replica) and to the mesh's
front door answers the same, bodies compared after removing ids, timestamps and fingerprints."""

from __future__ import annotations

from typing import Any

import pytest

from slomesh.cli.conformance import reference_server, vllm_replica_args
from slomesh.conformance.corpus import corpus
from slomesh.conformance.run import Row, run, table

pytestmark = pytest.mark.mesh

REFERENCE_PORT = 8311
ALIASES = "Valid aliases: "


def _more_models_only(row: Row) -> bool:
    """The known difference of a mesh serving several models: its 404 lists all of them as the
    valid aliases, and /v1/models lists all of them, where one vLLM server names its own."""
    ref, got = row.reference.content, row.tested.content
    if row.case.name == "error/chat/unknown-model":
        a, b = ref["error"]["message"], got["error"]["message"]
        return a.split(ALIASES)[0] == b.split(ALIASES)[0] and ALIASES in b
    if row.case.name == "models":
        return all(entry in got["data"] for entry in ref["data"])
    return False


def test_every_case_answers_as_bare_vllm(live_mesh: dict[str, Any]) -> None:
    replica = vllm_replica_args(live_mesh["config"])
    front_door = live_mesh["openai"].removesuffix("/v1")
    cases = corpus(replica["model"])
    assert len(cases) >= 80
    with reference_server(replica, REFERENCE_PORT) as reference:
        rows = run(cases, reference, front_door)
    differing = [r for r in rows if not r.same and not _more_models_only(r)]
    assert not differing, table(differing)
    # the corpus reaches vLLM's own errors, not only successes
    assert {r.reference.status for r in rows} >= {200, 400, 404}
