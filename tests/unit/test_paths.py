"""Folders written whole or not at all (models, drafters), and two first runs at once."""

from __future__ import annotations

import pytest

from orchestrator.paths import atomic_folder


def test_atomic_folder_writes_whole_or_nothing(tmp_path):
    out = tmp_path / "model"
    with pytest.raises(RuntimeError):
        with atomic_folder(out) as tmp:
            (tmp / "config.json").write_text("{}")
            raise RuntimeError("crash mid-way")
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []  # nothing half-written, no leftovers
    with atomic_folder(out) as tmp:
        (tmp / "config.json").write_text("1")
    assert (out / "config.json").read_text() == "1"
    with atomic_folder(out) as tmp:  # replace (a retrained drafter)
        (tmp / "config.json").write_text("2")
    assert (out / "config.json").read_text() == "2" and [p.name for p in tmp_path.iterdir()] == ["model"]


def test_first_writer_wins_when_asked(tmp_path):
    """Two processes converting the demo model at once: the second keeps the first's folder (an engine may be
    loading it) instead of deleting it under its feet."""
    out = tmp_path / "model"
    with atomic_folder(out, replace=False) as tmp:
        (tmp / "config.json").write_text("mine")
        out.mkdir()  # meanwhile another process finished
        (out / "config.json").write_text("theirs")
    assert (out / "config.json").read_text() == "theirs" and [p.name for p in tmp_path.iterdir()] == ["model"]
