"""specsweep: benchmark LLM speculative decoding methods under matched conditions.

Data path: sweep YAML -> spec -> controller -> engine actors (Ray) -> engine backend (vllm | fake)
-> load generator -> metrics -> store (SQL) -> results.
"""

__version__ = "0.1.0"
