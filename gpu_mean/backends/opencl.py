"""OpenCL backend (placeholder until the OpenCL issue lands)."""


def discover():
    return [], "the OpenCL backend is not built yet"
