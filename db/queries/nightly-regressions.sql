-- Nightly verdicts other than ok, newest night first.
SELECT suite, night, spec_name, label, num_speculative_tokens AS k, dataset, concurrency, metric,
       round(CAST(value AS NUMERIC), 2) AS value, round(CAST(history_median AS NUMERIC), 2) AS history_median, round(CAST(change AS NUMERIC), 3) AS change,
       history_n, verdict, note
FROM nightly_history
WHERE verdict <> 'ok'
ORDER BY night DESC, suite, spec_name, label
