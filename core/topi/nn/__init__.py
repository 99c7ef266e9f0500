"""Neural-network operators: convolution, pooling, padding and activations (TVM's ``topi.nn``)."""

from .conv2d import conv2d, conv2d_nchw, conv2d_nhwc, get_pad_tuple
from .elemwise import leaky_relu, relu
from .pad import pad
from .pooling import pool

__all__ = ["conv2d", "conv2d_nchw", "conv2d_nhwc", "get_pad_tuple", "leaky_relu", "relu", "pad", "pool"]
