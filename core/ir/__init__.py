"""The tensor IR: nodes, dtypes, buffers, functions, traversal and text."""

from .buffer import DEFAULT_DATA_ALIGNMENT, Buffer, decl_buffer
from .container import Array, Map, convert
from .dtype import DataType
from .expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, Broadcast, BufferLoad, Call, Cast, CmpOp, Div,
    FloatImm, FloorDiv, FloorMod, IntImm, IterVar, Let, Max, Min, Mod, Mul, Not, Or, PrimExpr,
    Ramp, Range, Select, Shuffle, SizeVar, StringImm, Sub, Var,
)
from .function import GlobalVar, IRModule, PrimFunc
from .functor import Mutator, Visitor, collect, ir_transform, post_order_visit, substitute
from .node import Node, fields_of, register_object, registered_types
from .op import Op, list_ops, register_intrin_rule, register_lowering, register_op
from .stmt import (
    Allocate, AssertStmt, AttrStmt, BufferStore, Evaluate, For, ForKind, IfThenElse, LetStmt,
    SeqStmt, Stmt, While, no_op, seq,
)
from .producer import ProducerLoad, ProducerRealize, ProducerStore
from .reduce import CommReducer, Reduce
from .env_func import EnvFunc
from .reflection import make_node
from . import intrin as _intrin  # noqa: F401  (registers the intrinsic ops)

__all__ = [
    "DataType", "Node", "register_object", "registered_types", "fields_of",
    "PrimExpr", "Var", "SizeVar", "IntImm", "FloatImm", "StringImm", "Cast", "BinaryOp", "CmpOp",
    "Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max",
    "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not", "Select", "BufferLoad", "Ramp",
    "Broadcast", "Shuffle", "Let", "Call", "Range", "IterVar", "Op", "register_op", "register_lowering", "register_intrin_rule", "list_ops",
    "Stmt", "LetStmt", "AttrStmt", "AssertStmt", "BufferStore", "Allocate", "For", "ForKind", "While",
    "IfThenElse", "Evaluate", "SeqStmt", "seq", "no_op",
    "Buffer", "decl_buffer", "DEFAULT_DATA_ALIGNMENT", "PrimFunc", "GlobalVar", "IRModule",
    "Array", "Map", "convert", "make_node", "CommReducer", "Reduce", "EnvFunc", "ProducerLoad", "ProducerStore", "ProducerRealize", "Visitor", "Mutator", "post_order_visit", "collect", "substitute", "ir_transform",
]
