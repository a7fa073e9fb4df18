"""How far the capacity search lands from a known saturation point because of the arrival schedule alone
(issue 51): `raw` schedules (the drawn gaps, as before) against the default `exact` ones (rescaled to offer the
nominal rate), 16 prompts per probe, over seeds.

A model, not an engine: a configuration saturates at MU requests/s, and a probe at nominal rate r passes exactly
when its window's schedule offered at most MU (`orchestrator.load.arrival_offsets`, the same schedules the
engine actors send on). Everything else is specsweep's own capacity search (`controller.capacity.
CapacitySearch`, the spec's defaults: start 1 req/s, resolution 0.1). So the error printed is the part of the
capacity figure's error the schedule causes; an engine adds its own noise on top (not measured here).

    .venv/bin/python benchmarks/capacity_rate_error.py [--prompts 16] [--seeds 20] [--mu 12.5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.controller.capacity import CapacitySearch  # noqa: E402
from orchestrator.load import arrival_offsets  # noqa: E402
from orchestrator.records import OpenLoopLoad  # noqa: E402
from orchestrator.spec.models import CapacitySpec  # noqa: E402


def offered(rate: float, seed: int, n: int, schedule: str) -> float:
    off = arrival_offsets(OpenLoopLoad(request_rate=rate, seed=seed, schedule=schedule), n)
    return (n - 1) / (off[-1] - off[0])


def capacity(mu: float, seed: int, n: int, schedule: str) -> float | None:
    search = CapacitySearch(CapacitySpec())
    while (rate := search.next_rate()) is not None:
        search.observe(rate, 1.0 if offered(rate, seed, n, schedule) <= mu else 0.0)
    return search.passing


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--mu", type=float, default=12.5, help="the saturation point (requests/s)")
    a = p.parse_args()
    print(f"saturation point {a.mu:g} req/s; {a.prompts} prompts per probe; seeds 0-{a.seeds - 1}; "
          f"capacity = the search's highest passing rate")
    print("schedule | median |error| | worst error | within 10 % | errors by seed")
    for schedule in ("raw", "exact"):
        errors = []
        for seed in range(a.seeds):
            found = capacity(a.mu, seed, a.prompts, schedule)
            errors.append(float("inf") if found is None else found / a.mu - 1)
        worst = max(errors, key=abs)
        within = sum(abs(e) <= 0.10 for e in errors)
        print(f"{schedule} | {statistics.median(abs(e) for e in errors):.1%} | {worst:+.1%} | {within}/{len(errors)} | "
              + " ".join(f"{e:+.0%}" for e in errors))


if __name__ == "__main__":
    main()
