"""Frontends built on the descriptor layer: the functional API, ONNX operators, OpenVINO."""
