"""dgsa-bench: robustness benchmarking for MHSA, DiffAttn and DGSA attention."""

__version__ = "0.1.0"
