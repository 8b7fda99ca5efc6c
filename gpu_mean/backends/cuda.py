"""CUDA backend (placeholder until the CUDA issue lands)."""


def discover():
    return [], "the CUDA backend is not built yet"
