"""The docs and shipped campaign files stay true to the code."""
from __future__ import annotations

from pathlib import Path

import pytest

from gapfuzz.fuzzer.config.campaign import default_campaign_path, load_campaign
from gapfuzz.results.schema import COLUMNS

REPO = Path(__file__).resolve().parent.parent


def test_every_column_is_documented():
    text = (REPO / "docs" / "results.md").read_text()
    missing = [c for c in COLUMNS if f"`{c}`" not in text]
    assert not missing, f"docs/results.md lacks {missing}"


@pytest.mark.parametrize("path", sorted((REPO / "campaigns").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_campaigns_are_valid(path):
    load_campaign(path)


def test_default_campaign_is_the_shipped_one():
    assert (REPO / "campaigns" / "default.yaml").read_text() == default_campaign_path().read_text()


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    command = 'pip install -e ".[all,test]" && ruff check . && python -m pytest'
    assert command in readme and command in ci
