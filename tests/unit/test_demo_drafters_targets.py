"""benchmarks/demo_drafters.py's target lines: the K = 7 vs K = 3 verdict says when the two rows' answers
differ from the baseline's (flag `lossy?`), since their AL is then measured over partly different text."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _target_lines(tmp_path, monkeypatch):
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the benchmarks' work folder, made on import
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("demo_drafters_bench", BENCH / "demo_drafters.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod.target_lines


def _row(al, flags="", low=1.1):
    from tests.records import trial_result

    return trial_result(acceptance_length=al, speedup_ci_low=low, flags=flags)


def test_k7_verdict_names_lossy_rows(tmp_path, monkeypatch):
    target_lines = _target_lines(tmp_path, monkeypatch)
    by = {("eagle3", 3): _row(1.6), ("dflash", 3): _row(1.529), ("dflash", 7): _row(1.540, "lossy?")}
    line = [x for x in target_lines(by) if x.startswith("dflash AL at K = 7")][0]
    assert "met" in line and "NOT met" not in line
    assert "K = 7 answered differently from the baseline" in line and "K = 3" not in line.split("(but")[1]


def test_k7_verdict_plain_when_no_row_is_lossy(tmp_path, monkeypatch):
    target_lines = _target_lines(tmp_path, monkeypatch)
    by = {("dflash", 3): _row(1.637), ("dflash", 7): _row(1.618)}
    line = [x for x in target_lines(by) if x.startswith("dflash AL at K = 7")][0]
    assert line.endswith("NOT met")


def test_a_dflash_variant_gets_its_own_targets_and_k7_verdict(tmp_path, monkeypatch):
    target_lines = _target_lines(tmp_path, monkeypatch)
    by = {("dflash", 3): _row(1.55), ("dflash", 7): _row(1.54), ("dflash-v", 3): _row(1.45, low=0.9),
          ("dflash-v", 7): _row(1.50)}
    lines = target_lines(by, ["eagle3", "dflash", "dflash-v"])
    assert "eagle3: no K = 3 row" in lines
    assert [x for x in lines if x.startswith("dflash-v K = 3")] == [
        "dflash-v K = 3: AL 1.450 >= 1.5: NOT met; speedup interval above 1.0: NOT met (low 0.9)"]
    assert [x.rsplit(": ", 1)[1] for x in lines if "AL at K = 7" in x] == ["NOT met", "met"]  # shipped, variant
