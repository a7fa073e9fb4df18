"""Schema migrations (db/migrations, Alembic): a new store is created at head and matches the code's
tables exactly; a store created by the first released schema is upgraded in place, rows kept."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from orchestrator.controller.runner import run_sweep
from orchestrator.spec import load_spec
from orchestrator.store import Store, normalize_url
from orchestrator.store.migrate import VERSION_TABLE, head_revision
from orchestrator.store.schema import metadata

MIGRATIONS = Path(__file__).resolve().parents[2] / "db" / "migrations"



def test_new_store_is_at_head_and_matches_the_code(store_url):
    st = Store(store_url)
    assert st.schema_revisions == (None, head_revision())
    with st.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_object": lambda o, name, t, r, c: not (
            t == "table" and name not in metadata.tables)})
        assert compare_metadata(ctx, metadata) == []
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == head_revision()
    assert Store(store_url).schema_revisions == (head_revision(), head_revision())  # idempotent


def test_first_released_schema_is_upgraded_with_its_rows(ray_session, store_url, write_spec):
    engine = create_engine(normalize_url(store_url))
    # the first released schema, as frozen in revision 0001 (generated here, not a committed fixture), and a
    # view on it like the one that release created
    spec = importlib.util.spec_from_file_location("rev0001", MIGRATIONS / "versions" / "0001_first_release.py")
    rev0001 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rev0001)
    with engine.begin() as conn:
        rev0001.metadata.create_all(conn)
        conn.execute(text("CREATE VIEW trial_results AS SELECT t.*, m.output_tok_s FROM sweep_trials t "
                          "LEFT JOIN sweep_trial_metrics m ON m.trial_id = t.id"))
        conn.execute(text("INSERT INTO sweeps (name, spec_hash, spec, status, created_at) "
                          "VALUES ('old', 'h', '{}', 'complete', CURRENT_TIMESTAMP)"))
        conn.execute(text(
            "INSERT INTO sweep_trials (sweep_id, trial_number, method_label, method, backend, method_params, params, "
            "point_key, concurrency, dataset, engine_config, engine_config_hash, model, state, attempt, "
            "on_pareto_front, created_at) VALUES (1, 0, 'baseline', 'baseline', 'fake', '{}', '{}', 'k', 1, "
            "'smoke', '{}', 'x', 'm', 'COMPLETE', 1, false, CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO sweep_trial_metrics (trial_id, output_tok_s, repeats, failed_requests) "
                          "VALUES (1, 42.0, 1, 0)"))
    engine.dispose()
    st = Store(store_url)
    assert st.schema_revisions == ("0001", head_revision())
    (old,) = st.trial_results("old")
    assert old.output_tok_s == 42.0 and old.role == "search" and old.speedup is None
    # and the upgraded store takes a new sweep
    spec = write_spec("""
name: after-upgrade
target: {model: fake-model}
engine: {backend: fake}
workload: {dataset: smoke, num_prompts: 3, max_tokens: 8}
methods: {ngram: {num_speculative_tokens: 2}}
measurement: {repeats: 1, warmup_requests: 0}
""")
    out = run_sweep(load_spec(spec), st)
    assert out.completed == 1 and out.baselines == 1
    assert [r.speedup is not None for r in st.trial_results("after-upgrade") if r.role == "search"] == [True]


def test_every_revision_goes_down_to_base_and_up_again_keeping_rows(store_url):
    """head -> base -> head one revision at a time (every downgrade() runs), a row written at each revision on the
    way up and still there at head, where the schema matches the code again. Each revision's tables and columns
    are the same on the way down as on the way up: a downgrade that leaves something behind is caught."""
    from sqlalchemy import inspect

    from orchestrator.store.migrate import downgrade, revisions, upgrade_to

    def shape(engine) -> dict[str, set[str]]:
        with engine.connect() as conn:
            ins = inspect(conn)
            return {t: {c["name"] for c in ins.get_columns(t)} for t in ins.get_table_names()
                    if t in metadata.tables}

    st = Store(store_url)
    engine = st.engine
    revs = revisions()
    assert revs[0] == "0001" and revs[-1] == head_revision()
    down: dict[str, dict[str, set[str]]] = {}
    for rev in reversed(["base"] + revs[:-1]):
        downgrade(engine, rev)
        down[rev] = shape(engine)
        with engine.connect() as conn:
            assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == (
                None if rev == "base" else rev)
    assert down["base"] == {}
    for rev in revs:
        upgrade_to(engine, rev)
        if rev in down:
            assert shape(engine) == down[rev], rev
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO sweeps (name, spec_hash, spec, status, created_at) "
                              f"VALUES ('at-{rev}', 'h', '{{}}', 'complete', CURRENT_TIMESTAMP)"))
    st.dispose()
    st = Store(store_url)  # views back, Optuna's tables kept
    assert st.schema_revisions == (head_revision(), head_revision())
    assert [s.name for s in st.list_sweeps()] == [f"at-{rev}" for rev in revs]
    with st.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_object": lambda o, name, t, r, c: not (
            t == "table" and name not in metadata.tables)})
        assert compare_metadata(ctx, metadata) == []
    st.dispose()
