"""API keys from a file or the environment, stored hashed; per-key token-rate limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.ingress.core.auth import APIKeyConfig, authenticate, key_digest
from services.ingress.core.errors import APIError
from services.ingress.core.rate_limit import TokenRateLimiter


def test_keys_are_stored_hashed_and_still_authenticate() -> None:
    cfg = APIKeyConfig(keys={"sk-alpha": {"tenant": "a", "tokens_per_minute": 100}})
    assert list(cfg.keys) == [key_digest("sk-alpha")]
    assert "sk-alpha" not in cfg.model_dump_json()
    who = authenticate("Bearer sk-alpha", cfg)
    assert (who.tenant, who.tokens_per_minute) == ("a", 100)
    with pytest.raises(APIError, match="invalid API key"):
        authenticate("Bearer sk-alph", cfg)
    # a dumped config (what travels to Serve replicas) loads to the same digests
    again = APIKeyConfig.model_validate(cfg.model_dump(mode="json"))
    assert again.keys == cfg.keys


def test_keys_from_a_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(f"sk-file: {{tenant: f}}\n'{key_digest('sk-pre')}': {{tenant: h}}\n")
    monkeypatch.setenv("SLOMESH_KEYS", json.dumps({"sk-env": {"tenant": "e"}}))
    cfg = APIKeyConfig(keys_file=str(path), keys_env="SLOMESH_KEYS", required=True)
    assert {authenticate(f"Bearer {k}", cfg).tenant for k in ("sk-file", "sk-pre", "sk-env")} == {
        "f",
        "h",
        "e",
    }
    assert cfg.keys_file is None and cfg.keys_env is None  # read once; digests travel


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"keys_file": "/nonexistent/keys.yaml"}, None, "keys_file: /nonexistent/keys.yaml"),
        ({"keys_env": "NO_SUCH_VAR"}, None, r"keys_env: \$NO_SUCH_VAR is not set"),
        ({"keys_env": "BAD"}, "[1, 2]", "must be a mapping"),
        ({"keys_env": "BAD"}, '{"has space": {"tenant": "x"}}', "no whitespace"),
        ({"keys_env": "BAD"}, '{"k": {"tenant": ""}}', "tenant"),
    ],
)
def test_bad_key_sources_name_the_field(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, str], env: str | None, message: str
) -> None:
    monkeypatch.delenv("NO_SUCH_VAR", raising=False)
    if env is not None:
        monkeypatch.setenv("BAD", env)
    with pytest.raises(ValueError, match=message):
        APIKeyConfig(**kwargs)


@pytest.mark.parametrize(
    ("charges", "expected_waits"),
    [
        # 600 tokens/min = 10 tokens/s, bucket of 600
        ([(0.0, 600), (0.0, 1)], [0.0, 0.1]),
        ([(0.0, 300), (0.0, 300), (0.0, 50)], [0.0, 0.0, 5.0]),
        ([(0.0, 600), (30.0, 300), (30.0, 1)], [0.0, 0.0, 0.1]),  # refilled 300 in 30 s
        ([(0.0, 100), (1000.0, 600)], [0.0, 0.0]),  # refill caps at the bucket size
    ],
)
def test_token_bucket(charges: list[tuple[float, int]], expected_waits: list[float]) -> None:
    lim = TokenRateLimiter()
    waits = [lim.charge("t", tokens, 600, now) for now, tokens in charges]
    assert waits == pytest.approx(expected_waits)


def test_token_bucket_refuses_a_charge_beyond_the_allowance_and_keeps_tenants_apart() -> None:
    lim = TokenRateLimiter()
    with pytest.raises(ValueError, match="allows 600 tokens per minute"):
        lim.charge("t", 601, 600, 0.0)
    assert lim.charge("a", 600, 600, 0.0) == 0.0
    assert lim.charge("b", 600, 600, 0.0) == 0.0
    assert lim.charge("a", 10, 600, 0.0) > 0
