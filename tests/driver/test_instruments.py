"""Pass instruments: timing, print-after, verify-after, IR dumps, env knobs."""

import io

import pytest

import loom
from loom.errors import LoomValueError, VerifyError
from loom.ir import Evaluate, IRModule, PrimFunc
from loom.transform import PassContext, PassInstrument, Sequential, prim_func_pass
from loom.transform.instrument import (
    DumpIR, PassTimingInstrument, PrintAfter, VerifyAfter, env_instruments, extend_context,
)


def _identity(name):
    return prim_func_pass(lambda f, m, c: f, name=name)


def _module():
    return IRModule({"main": PrimFunc([], Evaluate(loom.const(0)))})


@prim_func_pass(name="Breaker")
def _breaker(func, mod, ctx):
    """Uses a variable nothing defines: ill-formed IR."""
    return func.with_body(Evaluate(loom.var("ghost") + 1))


def test_timing_records_every_pass_with_its_nesting_depth():
    timing = PassTimingInstrument()
    seq = Sequential([_identity("A"), _identity("B")], name="Both")
    with PassContext(instruments=[timing]):
        seq(_module())
    assert [(n, d) for n, _, d in timing.timings] == [("A", 1), ("B", 1), ("Both", 0)]
    assert all(t >= 0 for _, t, _ in timing.timings)
    assert timing.total() == timing.timings[-1][1]
    assert "Both" in timing.render() and "total" in timing.render()


def test_timing_survives_a_failing_pass():
    timing = PassTimingInstrument()

    @prim_func_pass(name="Fails")
    def fails(f, m, c):
        raise RuntimeError("no")

    with PassContext(instruments=[timing]):
        with pytest.raises(loom.LoomError, match="pass Fails failed"):
            fails(_module())
        _identity("After")(_module())
    assert [n for n, _, _ in timing.timings] == ["After"]


def test_print_after_prints_only_the_named_passes():
    out = io.StringIO()
    with PassContext(instruments=[PrintAfter("B, C", stream=out)]):
        for name in "ABC":
            _identity(name)(_module())
    text = out.getvalue()
    assert "# IR after B" in text and "# IR after C" in text and "# IR after A" not in text
    assert f"# IR after B\n{_module()}" in text


def test_print_after_all():
    out = io.StringIO()
    with PassContext(instruments=[PrintAfter("all", stream=out)]):
        _identity("X")(_module())
        _identity("Y")(_module())
    assert out.getvalue().count("# IR after") == 2


def test_print_after_needs_a_selection():
    with pytest.raises(LoomValueError, match="at least one pass name"):
        PrintAfter(" , ")


def test_verify_after_names_the_pass_that_broke_the_ir():
    with PassContext(instruments=[VerifyAfter()]):
        _identity("Fine")(_module())
        with pytest.raises(VerifyError, match="after pass Breaker") as err:
            _breaker(_module())
    assert any("ghost" in p for p in err.value.problems)


def test_verify_after_can_skip_passes():
    with PassContext(instruments=[VerifyAfter(skip=["Breaker"])]):
        _breaker(_module())


def test_dump_ir_writes_numbered_files(tmp_path):
    dump = DumpIR(tmp_path / "ir")
    with PassContext(instruments=[dump]):
        _identity("First")(_module())
        _identity("weird name/<x>")(_module())
    names = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert names == ["00_First.txt", "01_weird_name_x.txt"]
    assert (tmp_path / "ir" / "00_First.txt").read_text().strip() == str(_module()).strip()
    assert dump.files == [tmp_path / "ir" / n for n in names]


def test_env_knobs(monkeypatch):
    monkeypatch.delenv("LOOM_PRINT_AFTER", raising=False)
    monkeypatch.delenv("LOOM_VERIFY", raising=False)
    assert env_instruments() == []
    monkeypatch.setenv("LOOM_VERIFY", "0")
    assert env_instruments() == []
    monkeypatch.setenv("LOOM_VERIFY", "1")
    monkeypatch.setenv("LOOM_PRINT_AFTER", "Simplify,UnrollLoop")
    kinds = env_instruments()
    assert [type(i) for i in kinds] == [PrintAfter, VerifyAfter]
    assert kinds[0].names == {"Simplify", "UnrollLoop"}


def test_extend_context_enters_only_the_extras_and_restores():
    events = []

    class Tracking(PassInstrument):
        def __init__(self, tag):
            self.tag = tag

        def enter_pass_ctx(self):
            events.append(("enter", self.tag))

        def exit_pass_ctx(self):
            events.append(("exit", self.tag))

    base_inst, extra = Tracking("base"), Tracking("extra")
    with PassContext(instruments=[base_inst], config={"tir.offset_factor": 4}) as build_ctx:
        with extend_context([extra]) as ctx:
            assert ctx.instruments == [base_inst, extra]
            assert ctx.get_config("tir.offset_factor") == 4
            assert PassContext.current() is ctx
        assert PassContext.current() is build_ctx
    assert events == [("enter", "base"), ("enter", "extra"), ("exit", "extra"), ("exit", "base")]
