-- Where speculation stops paying: the lowest concurrency with speedup < 1 per method configuration.
SELECT sweep, label, num_speculative_tokens AS k, dataset, crossover_concurrency, min_concurrency,
       max_concurrency, round(CAST(best_speedup AS NUMERIC), 2) AS best_speedup
FROM speedup_crossover
WHERE sweep = COALESCE(CAST(:sweep AS VARCHAR(120)), sweep)
ORDER BY sweep, label, k, dataset
