"""README.md's "A first request", run as written against the live simulated mesh: its curl
command and its `openai` client block, with the model and the endpoint the README shows replaced
by the live mesh's (its tiny model is the one `make up` serves; the session mesh listens where
`slomesh up` does; its client's placeholder key becomes one the session mesh knows)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import GOLD_KEY, TINY

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## A first request"
README_URL = "http://127.0.0.1:8100/v1"
README_KEY = 'api_key="unused"'
"""The README's client assumes a mesh without API keys (`make up`'s); the session mesh has keys,
where a key it does not know is refused (401), so the block runs with one it knows."""


def _blocks(language: str) -> list[str]:
    """The README's fenced blocks in the first-request section (``` + `language`)."""
    text = README.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end > 0 else len(text)]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def _as_live(code: str, live_mesh: dict[str, Any]) -> str:
    assert README_URL in code, code  # the README's endpoint is the one replaced
    assert f'"{TINY}"' in code, code  # and the model it names is the live mesh's tiny model
    return code.replace(README_URL, live_mesh["openai"])


def test_readme_curl_first_request(live_mesh: dict[str, Any]) -> None:
    curl = [b for b in _blocks("") if b.lstrip().startswith("curl")]
    assert len(curl) == 1, "README's first request has one curl command"
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    done = subprocess.run(
        ["bash", "-c", _as_live(curl[0], live_mesh)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["object"] == "chat.completion", answer
    assert answer["model"] == TINY
    choice = answer["choices"][0]
    assert choice["finish_reason"] in ("stop", "length")
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"]
    assert 0 < answer["usage"]["completion_tokens"] <= 16


def test_readme_openai_client_first_request(live_mesh: dict[str, Any], tmp_path: Path) -> None:
    blocks = _blocks("python")
    assert len(blocks) == 1, "README's first request has one Python block"
    script = tmp_path / "first_request.py"
    assert README_KEY in blocks[0] and "# no keys configured" in blocks[0], blocks[0]
    code = _as_live(blocks[0], live_mesh).replace(README_KEY, f'api_key="{GOLD_KEY}"')
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the stream printed no text"
