"""Bounds on every count and size (docs/src/guides/writing-a-sweep.md, "Limits"): far above any real sweep, low enough that a typo
(an extra 000) is refused at load time instead of starting an absurd sweep."""

MAX_LOAD = 100_000  # concurrency, max_concurrency, max_num_seqs values; request rate in requests/s
MAX_PROMPTS = 10_000_000  # workload.num_prompts
MAX_REPEATS = 1_000  # measurement.repeats
MAX_WARMUP = 10_000  # measurement.warmup_requests
MAX_MODEL_LEN = 16_777_216  # target.max_model_len (tokens); max_tokens and random_input_len stay within it
MAX_BATCHED_TOKENS = 16_777_216  # engine / space max_num_batched_tokens
MAX_TRIALS = 100_000  # search.n_trials
MAX_PROBES = 1_000  # search.capacity.max_probes
MAX_RESAMPLES = 1_000_000  # measurement.bootstrap_resamples
MAX_SECONDS = 7 * 86_400  # every timeout and time budget (a week)
