"""MkDocs hook: the configuration reference pages, generated from the code at every build.

The pages (configuration/<page>.md) come from slomesh/config_reference.py, so they always list
the fields of the code being documented; nothing generated is committed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]


def on_files(files: Files, config: Any) -> Files:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from slomesh.config_reference import pages

    for rel, text in pages().items():
        files.append(File.generated(config, rel, content=text))
    return files
