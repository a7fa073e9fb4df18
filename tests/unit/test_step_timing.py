"""The step timer (engines/step_timing.py) on runner objects shaped like vLLM's two GPU model runners, no engine:
V1's four methods are timed; V2's names (no `_model_forward`, no `propose_draft_token_ids`) give "not measured"
with the names missing, never a step count or times of zero."""

from __future__ import annotations

import time

from orchestrator.engines.step_timing import StepTimer


class V1Runner:
    def _model_forward(self):
        time.sleep(0.002)

    def propose_draft_token_ids(self):
        time.sleep(0.001)

    def execute_model(self):
        self._model_forward()

    def sample_tokens(self):
        self.propose_draft_token_ids()


class V2Runner:  # vllm/v1/worker/gpu/model_runner.py: the step is execute_model + sample_tokens
    def execute_model(self):
        pass

    def sample_tokens(self):
        pass


class Worker(StepTimer):
    def __init__(self, runner):
        self.model_runner = runner


def test_v1_runner_is_timed_step_by_step():
    w = Worker(V1Runner())
    assert w.specsweep_timing_install() is True
    for _ in range(3):
        w.model_runner.execute_model()
        w.model_runner.sample_tokens()
    steps, total, verify, drafter, clock = w.specsweep_timing_read()
    assert steps == 3 and clock == "perf_counter"
    assert total >= verify + drafter > 0 and verify > 0 and drafter > 0


def test_v2_runner_is_not_measured_rather_than_zero():
    w = Worker(V2Runner())
    why = w.specsweep_timing_install()
    assert isinstance(why, str) and why.startswith("not measured on this runner: V2Runner has no ")
    assert "_model_forward" in why and "propose_draft_token_ids" in why
    assert w.specsweep_timing_read() is None  # the rows carry no timing, not zeros
    assert w.model_runner.execute_model.__qualname__ == "V2Runner.execute_model"  # nothing wrapped
