"""astra-hetero: heterogeneity-aware LLM-training simulation on ASTRA-sim and ns-3."""

__version__ = "0.1.0"
