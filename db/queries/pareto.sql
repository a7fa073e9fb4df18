-- The Pareto front of each sweep for its objectives.
SELECT sweep, trial, label, num_speculative_tokens AS k, dataset, concurrency, max_num_seqs,
       round(CAST(output_tok_s AS NUMERIC), 1) AS tok_s, round(CAST(tpot_ms_p99 AS NUMERIC), 1) AS tpot_p99_ms, round(CAST(speedup AS NUMERIC), 2) AS speedup
FROM pareto
WHERE sweep = COALESCE(CAST(:sweep AS VARCHAR(120)), sweep)
ORDER BY sweep, output_tok_s DESC
