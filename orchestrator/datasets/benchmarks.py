"""The paper benchmarks (mt-bench, gsm8k, math500, humaneval, mbpp) with the paper harnesses' prompt formats.

Sources, in order: a local file (workload.path / workload.paths[name]: JSONL, JSON or parquet), the local
Hugging Face datasets cache or the hub through the `datasets` package (optional: `pip install datasets`).
Without either, a clear message says what to provide. Prompt formats follow the DFlash/xPress harnesses
(see docs/src/guides/datasets.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .base import DatasetError, Prompt, register

MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
HUMANEVAL_FORMAT = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n{prompt}\n```"


@dataclass(frozen=True)
class HubSource:
    name: str  # our dataset name
    repo: str
    config: str | None
    split: str
    render: Callable[[dict], str]  # record -> user prompt


def _mt_bench(rec: dict) -> str:
    turns = rec.get("prompt") or rec.get("turns")
    if isinstance(turns, list) and turns:
        return str(turns[0])  # turn 1 (the xPress convention)
    raise KeyError("prompt")


def _mbpp(rec: dict) -> str:
    text = rec.get("prompt") or rec.get("text")
    tests = "\n".join(rec.get("test_list") or [])
    return f"{text}\nYour code should pass these tests:\n{tests}" if tests else str(text)


SOURCES = {
    "gsm8k": HubSource("gsm8k", "openai/gsm8k", "main", "test", lambda r: r["question"] + MATH_SUFFIX),
    "math500": HubSource("math500", "HuggingFaceH4/MATH-500", None, "test", lambda r: r["problem"] + MATH_SUFFIX),
    "humaneval": HubSource("humaneval", "openai/openai_humaneval", None, "test",
                           lambda r: HUMANEVAL_FORMAT.format(prompt=r["prompt"])),
    "mbpp": HubSource("mbpp", "google-research-datasets/mbpp", "sanitized", "test", _mbpp),
    "mt-bench": HubSource("mt-bench", "HuggingFaceH4/mt_bench_prompts", None, "train", _mt_bench),
}


def _read_local(path: Path) -> list[dict]:
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            try:
                import pandas as pd
            except ImportError:
                raise DatasetError(f"{path}: reading parquet needs pandas and pyarrow (pip install pandas pyarrow)") from None
            return pd.read_parquet(path).to_dict(orient="records")
        text = path.read_text(encoding="utf-8")
        if suffix == ".json":
            data = json.loads(text)
            return data if isinstance(data, list) else list(data.values())[0]
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DatasetError(f"{path}:{n}: not valid JSON: {e.msg}") from None
        return out
    except OSError as e:
        raise DatasetError(f"cannot read {path}: {e}") from None


def _from_hub(src: HubSource) -> list[dict]:
    try:
        import datasets
    except ImportError:
        raise DatasetError(
            f"dataset {src.name!r}: no local file given (workload.path or workload.paths.{src.name}) and the "
            f"`datasets` package is not installed to read {src.repo} from the hub or its cache; either "
            f"`pip install datasets` (with hub access) or download the {src.split} split to a JSONL/parquet file"
        ) from None
    try:
        ds = datasets.load_dataset(src.repo, src.config, split=src.split)
    except Exception as e:
        raise DatasetError(f"dataset {src.name!r}: cannot load {src.repo} ({src.config or 'default'}, {src.split}) "
                           f"from the hub or the local cache: {type(e).__name__}: {str(e).splitlines()[0][:300]}; "
                           f"give a local file in workload.paths.{src.name}") from None
    return [dict(r) for r in ds]


def load_benchmark(src: HubSource, path: str | None) -> list[Prompt]:
    records = _read_local(Path(path).expanduser()) if path else _from_hub(src)
    prompts = []
    for i, rec in enumerate(records):
        try:
            text = src.render(rec)
        except (KeyError, TypeError) as e:
            where = path or src.repo
            raise DatasetError(f"{where}: record {i + 1} has no field {e} expected for {src.name!r}") from None
        prompts.append(Prompt(id=f"{src.name}-{i}", messages=({"role": "user", "content": text},), category=src.name))
    return prompts


for _name, _src in SOURCES.items():
    register(_name)(lambda path=None, _src=_src, **_: load_benchmark(_src, path))
