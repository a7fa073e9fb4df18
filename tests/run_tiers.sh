#!/usr/bin/env bash
# `make test`: the whole suite as two pytest processes — the real-engine tier (marker vllm: vLLM engines one at
# a time, they would starve each other on a small machine) and the rest (fake-backend sweeps and Ray jobs through
# Ray, SQLite/PostgreSQL, the wheel, pure tests) — side by side, or one after the other with
# TEST_PARALLEL=0. Each has its own Ray instance, PostgreSQL database and temp folders; they share the model
# cache. Side by side, the engine tier runs at niceness 10 (below). The engine tier's log is printed when both
# are done. Exit status: the first failing tier's.
# usage: tests/run_tiers.sh PYTHON [pytest args...]
set -uo pipefail
py="$1"; shift
engines=(-m "vllm")
rest=(-m "not vllm")
if [ "${TEST_PARALLEL:-1}" = "0" ]; then
  "$py" -m pytest -ra "${rest[@]}" "$@"; a=$?
  "$py" -m pytest -ra "${engines[@]}" "$@"; b=$?
else
  log="$(mktemp -t specsweep-engine-tier.XXXXXX.log)"
  echo "engine tier (vllm) running beside this one; its log follows at the end ($log)"
  # The engine tier at niceness 10, so that the rest (many short tests) is not starved by a vLLM engine's OpenMP
  # threads. Since the fake backend runs on a simulated clock (orchestrator/load/clock.py) no verdict of the rest
  # rides the wall clock; before it, an engine beside it at equal priority failed a capacity bracket (2.29 req/s
  # for a nominal 12.5, 2026-12-03) and a recommendation's margin. The rows the engine tier writes say low_priority.
  nice -n 10 "$py" -m pytest -ra "${engines[@]}" "$@" >"$log" 2>&1 &
  pid=$!
  trap 'kill "$pid" 2>/dev/null' INT TERM
  "$py" -m pytest -ra "${rest[@]}" "$@"; a=$?
  wait "$pid"; b=$?
  echo; echo "================================ engine tier ================================"
  cat "$log"
fi
echo "tiers: rest exit $a, engines exit $b"
if [ "$a" -ne 0 ]; then exit "$a"; fi
exit "$b"
