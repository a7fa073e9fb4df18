-- Rows whose numbers are suspect (docs/src/concepts/measurement.md, Flags), newest first.
SELECT sweep, trial, label, num_speculative_tokens AS k, dataset, concurrency, flags, round(CAST(acceptance_length AS NUMERIC), 2) AS al,
       greedy_match_rate, round(CAST(output_tok_s_cv AS NUMERIC), 3) AS cv
FROM trial_results
WHERE flags IS NOT NULL AND sweep = COALESCE(CAST(:sweep AS VARCHAR(120)), sweep)
ORDER BY finished_at DESC
