"""Reproducers in each stack's own API (``stacks``), built from a graph as plain torch calls
(``torch_code``), an ONNX model as ``onnx.helper`` calls (``onnx_code``) and exact literals (``literals``)."""
