"""build_config: options, defaults, errors, nesting, add_lower_pass validation."""

import pytest

import loom
from loom.driver import BUILD_CONFIG_OPTIONS, build_config
from loom.errors import LoomTypeError, LoomValueError
from loom.transform import PassContext, PassInstrument

SEED_DEFAULTS = {
    "auto_unroll_max_step": 0, "auto_unroll_max_depth": 8, "auto_unroll_max_extent": 0,
    "unroll_explicit": True, "detect_global_barrier": True, "partition_const_loop": False,
    "data_alignment": -1, "offset_factor": 0, "restricted_func": True, "double_buffer_split_loop": 2,
    "dump_pass_ir": False, "disable_vectorize": False, "instrument_bound_checkers": False,
}


def test_every_option_is_stored_under_its_tir_key():
    values = {"auto_unroll_max_step": 7, "auto_unroll_max_depth": 3, "auto_unroll_max_extent": 5,
              "unroll_explicit": False, "detect_global_barrier": False, "partition_const_loop": True,
              "data_alignment": 128, "offset_factor": 8, "restricted_func": False,
              "double_buffer_split_loop": 0, "add_lower_pass": [(1, lambda s: s)], "dump_pass_ir": True,
              "dump_pass_ir_dir": "/tmp/x", "disable_vectorize": True, "instrument_bound_checkers": True}
    assert set(values) == set(BUILD_CONFIG_OPTIONS)
    cfg = build_config(**values)
    assert isinstance(cfg, PassContext)
    for name, v in values.items():
        if name != "add_lower_pass":
            assert cfg.get_config(f"tir.{name}") == v
    assert cfg.get_config("tir.add_lower_pass")[0][0] == 1


def test_defaults_are_the_seeds():
    with build_config() as cfg:
        for name, v in SEED_DEFAULTS.items():
            assert cfg.get_config(f"tir.{name}") == v, name
        assert cfg.get_config("tir.dump_pass_ir_dir") == "."


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(LoomValueError, match="unknown build_config option 'unroll'") as err:
        build_config(unroll=4)
    for name in BUILD_CONFIG_OPTIONS:
        assert name in str(err.value)


@pytest.mark.parametrize("option, value, error", [
    ("auto_unroll_max_step", "16", LoomTypeError),
    ("auto_unroll_max_step", -1, LoomValueError),
    ("offset_factor", -4, LoomValueError),
    ("data_alignment", 48, LoomValueError),
    ("unroll_explicit", "yes", LoomTypeError),
])
def test_bad_values_are_rejected(option, value, error):
    with pytest.raises(error, match=option):
        build_config(**{option: value})


def test_is_a_context_manager_that_becomes_current():
    before = PassContext.current()
    with build_config(partition_const_loop=True) as cfg:
        assert PassContext.current() is cfg
    assert PassContext.current() is before


def test_inner_inherits_what_it_does_not_set_and_exit_restores_the_outer():
    with build_config(auto_unroll_max_step=16, offset_factor=4) as outer:
        with build_config(offset_factor=8) as inner:
            assert inner.get_config("tir.auto_unroll_max_step") == 16
            assert inner.get_config("tir.offset_factor") == 8
        assert PassContext.current() is outer
        assert outer.get_config("tir.offset_factor") == 4
    assert PassContext.current().get_config("tir.auto_unroll_max_step") == 0


def test_outer_is_restored_when_the_inner_block_raises():
    with build_config(offset_factor=4) as outer:
        with pytest.raises(RuntimeError):
            with build_config(offset_factor=8):
                raise RuntimeError("boom")
        assert PassContext.current() is outer


def test_a_config_object_reentered_elsewhere_inherits_afresh():
    cfg = build_config(offset_factor=8)
    with build_config(auto_unroll_max_step=4):
        with cfg:
            assert cfg.get_config("tir.auto_unroll_max_step") == 4
    with cfg:
        assert cfg.get_config("tir.auto_unroll_max_step") == 0
        assert cfg.get_config("tir.offset_factor") == 8


def test_inherits_the_outer_instruments_without_entering_them_twice():
    class Counting(PassInstrument):
        entered = 0

        def enter_pass_ctx(self):
            self.entered += 1

    inst = Counting()
    with PassContext(instruments=[inst]):
        with build_config(offset_factor=2) as cfg:
            assert cfg.instruments == [inst]
    assert inst.entered == 1


def test_add_lower_pass_phases_above_three_run_in_phase_three():
    fn = lambda s: s  # noqa: E731
    cfg = build_config(add_lower_pass=[(0, fn), (2, fn), (7, fn)])
    assert [p for p, _ in cfg.get_config("tir.add_lower_pass")] == [0, 2, 3]


@pytest.mark.parametrize("entries, error, text", [
    ([(-1, lambda s: s)], LoomValueError, "phase -1 is negative"),
    ([(1.5, lambda s: s)], LoomTypeError, "phase must be an int"),
    ([(1, 42)], LoomTypeError, "Stmt -> Stmt callable"),
    ([lambda s: s], LoomTypeError, r"\(phase, pass\) pair"),
    ((lambda s: s), LoomTypeError, "list of"),
])
def test_add_lower_pass_is_validated(entries, error, text):
    with pytest.raises(error, match=text):
        build_config(add_lower_pass=entries)


def test_add_lower_pass_accepts_pass_objects():
    p = loom.transform.prim_func_pass(lambda f, m, c: f, name="Mine")
    cfg = build_config(add_lower_pass=[(1, p)])
    assert cfg.get_config("tir.add_lower_pass")[0][1] is p
