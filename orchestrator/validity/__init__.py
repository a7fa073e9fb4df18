"""What makes a number decidable: paired-baseline statistics, lossless checks, sanity flags and
environment fingerprints. Pure functions over measurements; the controller and the store call them."""

from .fingerprint import FingerprintMismatch, compared_fields, fingerprint_diff
from .flags import pairing_flags, trial_flags
from .lossless import first_token_test, greedy_match
from .stats import coefficient_of_variation, speedup_interval

__all__ = ["FingerprintMismatch", "coefficient_of_variation", "compared_fields", "first_token_test",
           "fingerprint_diff", "greedy_match", "pairing_flags", "speedup_interval", "trial_flags"]
