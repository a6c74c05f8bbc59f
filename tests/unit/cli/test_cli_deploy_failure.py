"""A failed deploy names each deployment Serve does not report healthy, with Serve's message."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ray import serve

from slomesh.launch import mesh


def _status(**deployments: tuple[str, str]) -> SimpleNamespace:
    deps = {n: SimpleNamespace(status=s, message=m) for n, (s, m) in deployments.items()}
    return SimpleNamespace(applications={"ingress": SimpleNamespace(deployments=deps)})


@pytest.mark.parametrize(
    ("deployments", "expected"),
    [
        (
            {
                "IngressDeployment": ("DEPLOY_FAILED", "OSError: [Errno 98] address in use"),
                "Other": ("HEALTHY", ""),
            },
            "ingress/IngressDeployment: DEPLOY_FAILED: OSError: [Errno 98] address in use",
        ),
        ({"Other": ("HEALTHY", "")}, "(no deployment reports a failure)"),
    ],
)
def test_unhealthy_deployments_are_named_with_serves_message(
    monkeypatch: pytest.MonkeyPatch, deployments: dict[str, tuple[str, str]], expected: str
) -> None:
    monkeypatch.setattr(serve, "status", lambda: _status(**deployments))
    assert mesh._unhealthy_deployments() == expected
