"""Passes over the IR and the infrastructure that runs them."""

from .pass_base import (
    ConfigOption, ModulePass, Pass, PassContext, PassInfo, PassInstrument, PrimFuncPass, Sequential,
    list_config_options, module_pass, prim_func_pass, register_config_option,
)

__all__ = [
    "ConfigOption", "ModulePass", "Pass", "PassContext", "PassInfo", "PassInstrument", "PrimFuncPass",
    "Sequential", "list_config_options", "module_pass", "prim_func_pass", "register_config_option",
]
