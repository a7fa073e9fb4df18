"""A store URL with a password, given through SPECSWEEP_DB_FILE: the password appears in no output, no row,
no report and no nightly report (grepped), and `specsweep submit` refuses to put it into a Ray job."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.store import Store
from orchestrator.store.urls import display_url, has_credentials
from orchestrator.submit import SubmitError, job_request

SECRET = "pw-Zq81-secret"
SPEC = """
name: secret-sweep
target: {model: fake-model}
engine: {backend: fake}
workload: {dataset: smoke, num_prompts: 3, max_tokens: 8}
methods: {ngram: {num_speculative_tokens: 2}}
measurement: {repeats: 1, warmup_requests: 0}
"""


def test_password_never_leaks(ray_session, pg_url, tmp_path, monkeypatch):
    # whoever SPECSWEEP_TEST_PG_URL names, the URL carries the secret (trust auth: any password is accepted)
    url = make_url(pg_url).set(password=SECRET).render_as_string(hide_password=False)
    assert SECRET in url
    url_file = tmp_path / "url"
    url_file.write_text(url + "\n")
    monkeypatch.delenv("SPECSWEEP_DB", raising=False)
    monkeypatch.setenv("SPECSWEEP_DB_FILE", str(url_file))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: s\nsweeps: [spec.yaml]\nmin_history: 1\n")
    runner = CliRunner()
    outputs = []
    for args in (["run", str(spec)], ["results", "secret-sweep"], ["report", "secret-sweep", "--out", str(tmp_path / "rep")],
                 ["nightly", str(suite), "--report-dir", str(tmp_path / "nightly")], ["db", "upgrade"],
                 ["query", "SELECT name FROM sweeps"], ["compare", "secret-sweep", "secret-sweep"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, (args, res.output)
        outputs.append(res.output)
    assert "***" in outputs[0]  # the store is named, masked
    with Store(url).engine.connect() as conn:
        rows = "".join(str(list(conn.execute(text(f"SELECT * FROM {t}")))) for t in inspect(conn).get_table_names())
    files = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file() and p != url_file)
    for where, content in (("command output", "".join(outputs)), ("store rows", rows), ("reports", files)):
        assert SECRET not in content, f"password leaked into {where}"


MASKING = [  # (URL as written, what is shown)
    ("postgresql://u:Secr3t@h:5432/db", "postgresql+psycopg://u:***@h:5432/db"),
    ("postgresql://u:p@ss-Secr3t@h/db", "postgresql+psycopg://u:***@h/db"),  # '@' inside the password
    ("postgresql://u:p%40Secr3t@h/db", "postgresql+psycopg://u:***@h/db"),  # percent-encoded
    ("postgresql://u:@h/db", "postgresql+psycopg://u:***@h/db"),  # an empty password is still a credential form
    ("postgresql://u@h/db?password=Secr3t", "postgresql+psycopg://u@h/db?password=***"),
    ("postgresql://u@h/db?sslmode=require&sslpassword=Secr3t", "postgresql+psycopg://u@h/db?sslmode=require&sslpassword=***"),
    ("postgresql://u@h/db?PASSWORD=Secr3t&application_name=x", "postgresql+psycopg://u@h/db?PASSWORD=***&application_name=x"),
    ("postgresql://u:Secr3t@h:notaport/db", "<unparseable store URL>"),
    ("postgresql://u:Secr3t@[bad/db", "<unparseable store URL>"),
    ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
    ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
]


@pytest.mark.parametrize("url,shown", MASKING)
def test_every_credential_form_is_masked(url, shown):
    assert display_url(url) == shown
    assert "Secr3t" not in display_url(url)
    assert has_credentials(url) == ("Secr3t" in url or ":@" in url)


def test_submit_refuses_a_credential_in_any_form(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    for url, _ in MASKING:
        if "Secr3t" not in url and ":@" not in url:
            continue
        with pytest.raises(SubmitError) as ei:
            job_request(spec, "secret-sweep", tmp_path, url, None)
        assert "Secr3t" not in str(ei.value) and "--store-file" in str(ei.value) and "SPECSWEEP_DB_FILE" in str(ei.value)


def test_submit_refuses_a_password_in_the_job(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    url = f"postgresql://u:{SECRET}@db:5432/x"
    try:
        job_request(spec, "secret-sweep", tmp_path, url, None)
        raise AssertionError("a password URL was accepted")
    except SubmitError as e:
        assert SECRET not in str(e) and "--store-file" in str(e)
    req = job_request(spec, "secret-sweep", tmp_path, None, "/etc/specsweep/url")
    assert req["runtime_env"]["env_vars"] == {"SPECSWEEP_DB_FILE": "/etc/specsweep/url"}
    assert req["entrypoint"] == "specsweep run s.yaml" and req["submission_id"].startswith("secret-sweep-")
    plain = job_request(spec, "secret-sweep", tmp_path, "postgresql://u@db:5432/x", None)
    assert plain["runtime_env"]["env_vars"] == {"SPECSWEEP_DB": "postgresql://u@db:5432/x"}
    outside = tmp_path.parent / "elsewhere.yaml"
    try:
        job_request(outside, "x", tmp_path, None, None)
        raise AssertionError("a spec outside the working dir was accepted")
    except SubmitError as e:
        assert "not inside the working dir" in str(e)
