"""lower(): phase order, user and plugin pass slots, simple_mode, PrimFunc formation, dump_pass_ir.

The built-in passes are replaced by recorders (the ``fake_pipeline`` fixture), so
these tests pin the driver's own behaviour; end-to-end lowering is in test_lower_e2e.py.
"""

import types

import pytest

import loom
from loom.driver import build_config, form_prim_func, get_binds, lower, pipeline
from loom.driver.lower import as_pass
from loom.errors import LoomError, LoomTypeError, LoomValueError
from loom.ir import Evaluate, IRModule, PrimFunc, SeqStmt
from loom.plugins import hookimpl
from loom.te.operation import placeholder
from loom.te.schedule import create_schedule
from loom.transform import PassInfo, PrimFuncPass

BUILTIN = ["StorageFlatten", "CanonicalSimplify", "LoopPartition", "VectorizeLoop", "InjectVirtualThread",
           "InjectDoubleBuffer", "StorageRewrite", "UnrollLoop", "Simplify3", "RemoveNoOp",
           "RewriteUnsafeSelect", "MakeAPI"]


def _stmt_pass(tag, log):
    def run(stmt):
        log.append(tag)
        return stmt

    run.__name__ = tag
    return run


def test_builtin_passes_run_in_classic_order(fake_pipeline, add_one):
    mod = lower(add_one())
    assert fake_pipeline == BUILTIN
    assert isinstance(mod, IRModule) and list(mod.functions) == ["add_one"]


def test_user_passes_run_at_the_end_of_their_phase(fake_pipeline, add_one):
    log = fake_pipeline
    passes = [(3, _stmt_pass("user3", log)), (0, _stmt_pass("user0", log)), (2, _stmt_pass("user2", log)),
              (1, _stmt_pass("user1", log)), (9, _stmt_pass("user9", log))]
    with build_config(add_lower_pass=passes):
        lower(add_one())
    assert log == ["user0", "StorageFlatten", "CanonicalSimplify", "user1", "LoopPartition", "VectorizeLoop",
                   "InjectVirtualThread", "InjectDoubleBuffer", "StorageRewrite", "UnrollLoop", "user2",
                   "Simplify3", "RemoveNoOp", "RewriteUnsafeSelect", "user3", "user9", "MakeAPI"]


def test_user_pass_may_be_a_pass_object(fake_pipeline, add_one):
    mine = PrimFuncPass(lambda f, m, c: (fake_pipeline.append("Mine"), f)[1], PassInfo("Mine"))
    with build_config(add_lower_pass=[(1, mine)]):
        lower(add_one())
    assert fake_pipeline.index("Mine") == fake_pipeline.index("CanonicalSimplify") + 1


def test_add_lower_pass_from_a_plain_pass_context_is_validated(fake_pipeline, add_one):
    with loom.transform.PassContext(config={"tir.add_lower_pass": [(-2, lambda s: s)]}):
        with pytest.raises(LoomValueError, match="negative"):
            lower(add_one())


def test_simple_mode_skips_partition_unroll_and_api(fake_pipeline, add_one):
    lower(add_one(), simple_mode=True)
    assert fake_pipeline == [n for n in BUILTIN if n not in ("LoopPartition", "UnrollLoop", "MakeAPI")]


def test_stmt_pass_rewrites_every_body(fake_pipeline, add_one):
    def wrap(stmt):
        return SeqStmt([stmt, Evaluate(loom.const(7))])

    with build_config(add_lower_pass=[(2, wrap)]):
        mod = lower(add_one())
    body = mod["add_one"].body
    assert isinstance(body, SeqStmt) and body.seq[1].value.value == 7


def test_stmt_pass_must_return_a_stmt(fake_pipeline, add_one):
    with build_config(add_lower_pass=[(1, lambda s: 42)]):
        with pytest.raises(LoomTypeError, match="returned a int, not a Stmt"):
            lower(add_one())


def test_as_pass_keeps_pass_objects_and_rejects_others():
    p = PrimFuncPass(lambda f, m, c: f, PassInfo("P"))
    assert as_pass(p) is p
    assert as_pass(_stmt_pass("named", [])).info.name == "named"
    with pytest.raises(LoomTypeError, match="got int"):
        as_pass(3)


def test_prim_func_gets_its_name_when_it_has_none(fake_pipeline):
    f = PrimFunc([], Evaluate(loom.const(0)))
    mod = lower(f, name="fresh")
    assert list(mod.functions) == ["fresh"] and mod["fresh"].attrs["global_symbol"] == "fresh"


def test_lowering_a_schedule_needs_args():
    A = placeholder((4,), "float32", name="A")
    with pytest.raises(LoomValueError, match="needs args"):
        lower(create_schedule(A.op))


def test_lowering_something_else_is_a_type_error():
    with pytest.raises(LoomTypeError, match="expects a Schedule .* got object"):
        lower(object(), [])


def test_bad_name_is_rejected(add_one):
    with pytest.raises(LoomValueError, match="non-empty str"):
        lower(add_one(), name="")


def test_missing_pass_module_is_named():
    make = pipeline.lazy_pass("no_such_pass_module", "NoSuchPass")
    with pytest.raises(LoomError, match=r"NoSuchPass from module loom\.transform\.no_such_pass_module"):
        make()


def test_plugin_passes_run_after_builtin_and_before_user_passes(fake_pipeline, add_one):
    asked = []
    plugin = types.ModuleType("phase_plugin")

    def loom_lower_passes(target, phase):
        asked.append((target.kind_name, phase))
        return [_stmt_pass(f"plugin{phase}", fake_pipeline)] if phase in (1, 3) else None

    plugin.loom_lower_passes = hookimpl(loom_lower_passes)
    loom.plugins.register(plugin)
    try:
        lower(add_one())
        assert asked == []  # no target: plugins are not asked
        with build_config(add_lower_pass=[(1, _stmt_pass("user1", fake_pipeline))]):
            with loom.target.Target("interp"):
                lower(add_one())
    finally:
        loom.plugins.unregister(plugin)
    assert asked == [("interp", p) for p in range(4)]
    second = fake_pipeline[len(BUILTIN):]
    assert second[second.index("CanonicalSimplify") + 1:][:2] == ["plugin1", "user1"]
    assert second[second.index("RewriteUnsafeSelect") + 1] == "plugin3"


def test_dump_pass_ir_writes_one_file_per_pass(fake_pipeline, add_one, tmp_path):
    with build_config(dump_pass_ir=True, dump_pass_ir_dir=str(tmp_path)):
        mod = lower(add_one())
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"{k:02d}_{name}.txt" for k, name in enumerate(BUILTIN)]
    assert (tmp_path / "11_MakeAPI.txt").read_text().strip() == str(mod).strip()


def test_no_dump_without_the_option(fake_pipeline, add_one, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lower(add_one())
    assert list(tmp_path.iterdir()) == []


# -- PrimFunc formation (contract 4) ---------------------------------------------------------------


def test_form_prim_func_binds_tensor_args_to_fresh_buffers():
    A = placeholder((4, 8), "float32", name="A")
    n = loom.var("n")
    with build_config(data_alignment=128, offset_factor=4, restricted_func=True):
        f = form_prim_func(Evaluate(loom.const(0)), [A, n], "f")
    buf = f.buffer_map[f.params[0]]
    assert f.params[1] is n
    assert buf.name == "A" and [int(x) for x in buf.shape] == [4, 8] and str(buf.dtype) == "float32"
    assert buf.data_alignment == 128 and buf.offset_factor == 4
    assert isinstance(buf.elem_offset, loom.ir.Var)
    assert f.attrs["global_symbol"] == "f" and f.attrs["tir.noalias"] is True
    assert dict(f.attrs["tensor_binds"]) == {A: buf}


def test_form_prim_func_uses_user_binds_and_records_non_arg_binds():
    A = placeholder((4,), "float32", name="A")
    T = placeholder((4,), "float32", name="T")
    bA = loom.decl_buffer((4,), "float32", name="bufA")
    bT = loom.decl_buffer((4,), "float32", name="bufT", scope="global")
    with build_config(restricted_func=False):
        f = form_prim_func(Evaluate(loom.const(0)), [A], "f", binds={A: bA, T: bT})
    assert f.params == (bA.data,) and f.buffer_map[bA.data] is bA
    assert dict(f.attrs["tensor_binds"]) == {A: bA, T: bT}
    assert f.attrs["tir.noalias"] is False


def test_default_buffers_are_compact_with_default_alignment():
    A = placeholder((3,), "int32", name="A")
    binds, args = get_binds([A])
    assert args[0] is binds[A] and binds[A].data_alignment == 64 and binds[A].offset_factor == 1
    assert binds[A].is_compact and int(binds[A].elem_offset) == 0


@pytest.mark.parametrize("args, error, text", [
    ([3], LoomTypeError, "argument 0 must be a Tensor, Buffer or Var, got int"),
    ("dup", LoomValueError, "given twice"),
])
def test_bad_arguments(args, error, text):
    if args == "dup":
        A = placeholder((3,), "int32", name="A")
        args = [A, A]
    with pytest.raises(error, match=text):
        get_binds(args)
