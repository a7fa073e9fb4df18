"""The command line's answers to bad input: exit 2 with one line that names the option, the file or the sweep
and what is allowed — nothing run, nothing written. `drafters train` exits and options. Pure: no Ray, no
database server, no engine."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.store import Store


@pytest.fixture
def empty_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    Store(url).dispose()
    return url


def invoke(*args: str, **env: str):
    return CliRunner().invoke(app, list(args), env=env or None)


def test_bad_format_names_the_allowed_ones(empty_store):
    for cmd in (["results", "x"], ["query", "SELECT 1"], ["compare", "a", "b"]):
        res = invoke(*cmd, "--store", empty_store, "--format", "xml")
        assert res.exit_code == 2 and "--format must be one of table, csv, json (got 'xml')" in res.output, (cmd, res.output)


def test_malformed_param_is_refused(empty_store):
    res = invoke("query", "SELECT :a AS a", "--store", empty_store, "-p", "a")
    assert res.exit_code == 2 and "--param 'a': expected NAME=VALUE" in res.output, res.output
    res = invoke("query", "SELECT :a AS a", "--store", empty_store, "-p", "b=1")
    assert res.exit_code == 2 and "parameters not used by the query: b" in res.output and "it takes: a" in res.output
    res = invoke("query", "SELECT :a AS a", "--store", empty_store, "-p", "a=7", "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout) == [{"a": 7}], res.output  # and a good one binds


@pytest.mark.parametrize("cmd", [["report", "nope"], ["compare", "nope", "other"], ["results", "nope"]])
def test_an_unknown_sweep_is_named_with_what_exists(cmd, empty_store, tmp_path):
    res = invoke(*cmd, "--store", empty_store, *(["--out", str(tmp_path / "r")] if cmd[0] == "report" else []))
    assert res.exit_code == 2 and "no sweep named 'nope'" in res.output and "sweeps there: (none)" in res.output, res.output
    assert not (tmp_path / "r").exists()  # nothing written


def test_an_unreadable_store_url_file_is_named(tmp_path):
    missing = tmp_path / "no-such-file"
    res = invoke("results", "x", SPECSWEEP_DB_FILE=str(missing), SPECSWEEP_DB="")
    assert res.exit_code == 2 and f"SPECSWEEP_DB_FILE={missing}: cannot read a store URL" in res.output, res.output
    empty = tmp_path / "empty"
    empty.write_text("")
    res = invoke("results", "x", SPECSWEEP_DB_FILE=str(empty), SPECSWEEP_DB="")
    assert res.exit_code == 2 and "cannot read a store URL" in res.output, res.output


def test_drafters_train_exits(monkeypatch, tmp_path):
    from orchestrator.drafters.train import run as train_run

    seen = {}

    def fake_train(settings, progress, force=False):
        seen.update(settings=settings, force=force)
        if settings.seed == 13:
            raise KeyboardInterrupt
        manifest = {"method": settings.method, "target": settings.target, "steps_done": 5, "final_losses": [1.0],
                    "final_accuracy": [0.5], "total_seconds": 1.0}
        return tmp_path / "drafter", manifest

    res = invoke("drafters", "train", "--method", "medusa")  # the real trainer refuses before any work
    assert res.exit_code == 2 and "--method medusa: allowed eagle3, dflash" in res.output, res.output
    monkeypatch.setattr(train_run, "train_drafter", fake_train)
    res = invoke("drafters", "train", "--method", "dflash", "--minutes", "2.5", "--force")
    assert res.exit_code == 0, res.output
    assert seen["force"] is True and seen["settings"].max_minutes == 2.5 and seen["settings"].method == "dflash"
    assert res.output.strip().splitlines()[-1] == str(tmp_path / "drafter")  # the folder on the last line
    res = invoke("drafters", "train", "--seed", "13")
    assert res.exit_code == 130 and "run the same command again to resume" in res.output, res.output
    assert seen["force"] is False


def test_minutes_stop_training_early_and_say_so(tmp_path):
    import torch

    from orchestrator.drafters.train.loop import run_training
    from orchestrator.drafters.train.run import TrainSettings

    model = torch.nn.Linear(4, 4)

    def step(idx, g):
        loss = model(torch.randn(8, 4, generator=g)).pow(2).mean()
        return loss, [loss.item()], [0.0], ""

    out = run_training(TrainSettings(method="eagle3", steps=20_000, max_minutes=0.001), model,  # 60 ms
                       tmp_path / "ckpt.pt", 8, step, lambda *a: None)
    assert out["stopped_early"] is True and 0 < out["steps_done"] < 20_000
    full = run_training(TrainSettings(method="eagle3", steps=20), model, tmp_path / "ckpt2.pt", 8, step, lambda *a: None)
    assert full["stopped_early"] is False and full["steps_done"] == 20 and full["resumed_from_step"] == 0
    again = run_training(TrainSettings(method="eagle3", steps=20), model, tmp_path / "ckpt2.pt", 8, step, lambda *a: None)
    assert again["resumed_from_step"] == 20 and again["steps_done"] == 20  # a finished checkpoint is only resumed
