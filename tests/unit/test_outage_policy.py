"""The store's outage policy in isolation (store/outage.py), pure: which errors are retried, one line down and
one line back, the bound, the lease guard before a retried write, and no waiting once given up. The same policy
against a real PostgreSQL restart: tests/unit/test_store_outage.py."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from orchestrator.errors import StoreLeaseLost, StoreUnavailable
from orchestrator.store.outage import OutagePolicy, StoreReachable, StoreUnreachable, connection_error

pytestmark = pytest.mark.pure


def refused() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("connection refused"))


class Flaky:
    """An operation that fails `n` times with `error`, then answers."""

    def __init__(self, n: int, error=refused):
        self.n, self.error, self.calls = n, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.n:
            raise self.error()
        return "ok"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("orchestrator.store.outage.time.sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr("orchestrator.store.outage.time.monotonic", lambda: clock[0])
    return clock


def test_a_short_outage_is_ridden_through_with_one_line_each_way():
    events = []
    policy = OutagePolicy("postgresql://u:***@h/db", bound_s=60)
    policy.listener = events.append
    assert policy.run(Flaky(5)) == "ok"
    assert [type(e) for e in events] == [StoreUnreachable, StoreReachable]
    assert events[0].reason == "connection refused" and events[1].after_s > 0


def test_one_dropped_pooled_connection_is_retried_silently():
    events = []
    policy = OutagePolicy("db", bound_s=60)
    policy.listener = events.append
    assert policy.run(Flaky(1)) == "ok" and events == []


def test_other_errors_are_never_retried():
    op = Flaky(3, error=lambda: IntegrityError("INSERT", {}, Exception("duplicate key")))
    with pytest.raises(IntegrityError):
        OutagePolicy("db", bound_s=60).run(op)
    assert op.calls == 1
    assert connection_error(ValueError("x")) is None


def test_past_the_bound_it_gives_up_and_then_never_waits(no_sleep):
    policy = OutagePolicy("postgresql://u:***@h/db", bound_s=30)
    with pytest.raises(StoreUnavailable, match=r"postgresql://u:\*\*\*@h/db unreachable .*=30 s.*run the same command"):
        policy.run(Flaky(10**6))
    assert 30 <= no_sleep[0] < 45 and policy.gave_up
    before = no_sleep[0]
    with pytest.raises(StoreUnavailable):
        policy.run(Flaky(10**6))
    assert no_sleep[0] == before  # on the way out: no more waiting


def test_a_lease_taken_over_meanwhile_stops_the_write():
    policy = OutagePolicy("db", bound_s=60)
    op = Flaky(3)
    with pytest.raises(StoreLeaseLost, match="stopped without writing"):
        policy.run(op, check_guard=lambda: False)
    assert op.calls == 2  # the write never ran after the guard said no
    assert policy.run(Flaky(3), check_guard=lambda: True) == "ok"


def test_the_retry_bound_comes_from_the_environment_and_bad_values_are_refused(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from orchestrator.cli import app
    from orchestrator.store.outage import RetrySettingError, retry_bound_s

    monkeypatch.delenv("SPECSWEEP_STORE_RETRY_S", raising=False)
    assert retry_bound_s() == 300
    monkeypatch.setenv("SPECSWEEP_STORE_RETRY_S", "0")
    assert retry_bound_s() == 0  # never retried
    for bad in ("soon", "-1", "inf"):
        monkeypatch.setenv("SPECSWEEP_STORE_RETRY_S", bad)
        with pytest.raises(RetrySettingError, match=r"SPECSWEEP_STORE_RETRY_S=.*expected seconds \(a number >= 0\)"):
            retry_bound_s()
    res = CliRunner().invoke(app, ["results", "x", "--store", f"sqlite:///{tmp_path / 'r.db'}"])
    assert res.exit_code == 2 and "SPECSWEEP_STORE_RETRY_S='inf'" in res.output and "Traceback" not in res.output


def test_a_retried_optuna_write_after_an_unacknowledged_commit_is_not_written_twice():
    """The controller's Optuna bookkeeping through the same policy: an attempt that wrote but whose commit was not
    acknowledged is followed by a retry, which finds the trial there (grid points added, asked trials told)."""
    import optuna

    from orchestrator.controller.study import StudyBook
    from orchestrator.records import TrialSummary
    from orchestrator.spec.models import SearchSpec

    def written_then_retried(operation):  # the first attempt commits, its answer is lost, the policy retries
        operation()
        return operation()

    study = optuna.create_study(direction="maximize")
    book = StudyBook(study, SearchSpec(), lambda params: {"k": optuna.distributions.IntDistribution(1, 8)},
                     retry=written_then_retried)
    assert book.tell(None, {"k": 3}, row_id=10, summary=TrialSummary(output_tok_s=50.0)) == 0
    assert book.tell(None, {"k": 4}, row_id=11, summary=TrialSummary(output_tok_s=60.0)) == 1
    book.retry = lambda operation: operation()  # an ask is not idempotent (a retried one leaves a stale trial)
    asked = book.ask()
    book.retry = written_then_retried
    assert book.tell(asked, {"k": asked.params.get("k", 0)}, row_id=12, summary=TrialSummary(output_tok_s=70.0)) == 2
    assert [(t.number, t.state.name) for t in study.trials] == [(0, "COMPLETE"), (1, "COMPLETE"), (2, "COMPLETE")]
