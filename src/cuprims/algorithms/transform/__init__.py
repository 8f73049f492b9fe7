"""Device-wide transforms: ``d_out[i] = op(d_in[i])`` and ``d_out[i] = op(d_in1[i], d_in2[i])``.

This folder is the algorithm's home: ``api`` (its public functions, description and host
dispatch), ``source`` (its CUDA C++ generator) and its kernel template ``cuprims_transform.cuh``.
"""

from cuprims.algorithms.transform.api import (BinaryTransform, UnaryTransform, binary_transform, make_binary_transform,
                                              make_unary_transform, unary_transform)

__all__ = ["BinaryTransform", "UnaryTransform", "binary_transform", "make_binary_transform", "make_unary_transform",
           "unary_transform"]
