"""HSC toolkit: Hierarchical Selective Classification (Goren, Galil & El-Yaniv, NeurIPS 2024)."""

__version__ = "0.2.0"
