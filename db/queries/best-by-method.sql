-- Best configuration per method, dataset and concurrency (highest output tok/s), with its speedup and interval.
-- Parameter :sweep (optional: all sweeps when absent).
SELECT sweep, label, dataset, concurrency, num_speculative_tokens AS k, max_num_seqs,
       round(CAST(output_tok_s AS NUMERIC), 1) AS tok_s, round(CAST(speedup AS NUMERIC), 2) AS speedup,
       round(CAST(speedup_ci_low AS NUMERIC), 2) AS ci_low, round(CAST(speedup_ci_high AS NUMERIC), 2) AS ci_high,
       round(CAST(acceptance_length AS NUMERIC), 2) AS al, flags
FROM method_summary
WHERE sweep = COALESCE(CAST(:sweep AS VARCHAR(120)), sweep)
ORDER BY sweep, dataset, concurrency, speedup DESC
