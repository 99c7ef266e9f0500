"""Target: parsing strings and dicts, canonical text, defaults, errors, hosts and keys."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom
from loom.errors import TargetError
from loom.target import AttrSpec, Target, TargetKind, override_kinds

from target_kinds import ALL


def same(a, b):
    """Both value comparisons agree, and say equal."""
    return a.same_config(b) and loom.structural_equal(a, b)


def test_parse_string():
    t = Target("llvm -mcpu=znver4 -mattr=+avx512f,+fma")
    assert t.kind.name == "llvm" and t.kind_name == "llvm"
    assert t.attrs == {"mattr": ("+avx512f", "+fma"), "mcpu": "znver4", "opt_level": 3}
    assert t.keys == ("cpu",) and t.host is None and t.device_type == 1


def test_parse_dict_equals_string_form():
    t = Target({"kind": "cuda", "arch": "sm_90"})
    assert t.attrs == {"arch": "sm_90", "max_num_threads": 1024, "thread_warp_size": 32}
    assert t.keys == ("cuda", "gpu") and t.device_type == 2
    assert same(t, Target("cuda -arch=sm_90"))
    assert t != Target("cuda -arch=sm_90")  # a node: == is identity


def test_canonical_string_sorts_and_omits_defaults():
    t = Target({"kind": "llvm", "opt_level": 3, "num_cores": 8, "mcpu": "skylake", "mattr": ["+avx2"]})
    assert str(t) == "llvm -mattr=+avx2 -mcpu=skylake -num_cores=8"
    assert str(Target("llvm -opt_level=2")) == "llvm -opt_level=2"
    assert repr(Target("cuda")) == "Target('cuda')"


def test_defaults_are_filled_and_explicit_defaults_are_the_same_target():
    assert Target("llvm").attrs == {"opt_level": 3}
    assert Target("llvm -opt_level=1").attrs["opt_level"] == 1
    assert same(Target({"kind": "llvm", "opt_level": 3}), Target("llvm"))
    assert Target("c").get_attr("compiler") == "cc" and Target("c").get_attr("flags", "-O2") == "-O2"


def test_quoted_values_and_bool_flags():
    t = Target("c -flags='-O3 -fPIC' -openmp")
    assert t.attrs["flags"] == "-O3 -fPIC" and t.attrs["openmp"] is True
    assert str(t) == "c -flags='-O3 -fPIC' -openmp=true"
    assert Target("c -openmp=false").attrs["openmp"] is False
    assert Target("c -flags=''").attrs["flags"] == ""


@pytest.mark.parametrize("text, fragment", [
    ("llvm -opt_level=fast", "target kind 'llvm': attribute 'opt_level' expects int"),
    ("llvm -mcpu", "attribute '-mcpu' needs a value: -mcpu=<str>"),
    ("c -openmp=maybe", "attribute 'openmp' expects bool"),
    ("", "starts with a kind name"),
    ("-mcpu=x", "starts with a kind name"),
    ("llvm mcpu=x", "expected '-name=value'"),
    ("llvm -mcpu=a -mcpu=b", "'-mcpu' is given twice"),
    ("llvm -mcpu='x", "cannot split target string"),
    ("llvm -host", "'-host' needs a value"),
])
def test_string_errors(text, fragment):
    with pytest.raises(TargetError, match=fragment):
        Target(text)


@pytest.mark.parametrize("spec, fragment", [
    ({"kind": "llvm", "opt_level": 3.5}, "expects int, got float 3.5"),
    ({"kind": "cuda", "max_num_threads": True}, "expects int, got bool"),
    ({"kind": "llvm", "mattr": "+a,,+b", "mcpu": 7}, "'mcpu' expects str, got int"),
    ({"arch": "sm_90"}, "needs a 'kind' entry"),
    ({"kind": "llvm", "keys": [""]}, "target keys must be a list of non-empty strings"),
])
def test_dict_errors(spec, fragment):
    with pytest.raises(TargetError, match=fragment):
        Target(spec)


def test_unknown_kind_and_attribute_errors_list_what_is_installed():
    with pytest.raises(TargetError, match="unknown target kind 'rocm'; installed kinds: c, cuda, ext_cpu"):
        Target("rocm -mcpu=gfx90a")
    with pytest.raises(TargetError) as err:
        Target("cuda -mcpu=x")
    assert "target kind 'cuda' has no attribute 'mcpu'; allowed: arch, max_num_threads, thread_warp_size" in str(err.value)
    with pytest.raises(TargetError, match="expects a target string"):
        Target(42)


def test_host_forms():
    t = Target("cuda", host="llvm")
    assert t.host.kind.name == "llvm" and t.host.host is None
    assert same(t, Target("cuda", host=Target("llvm")))
    assert same(t, Target({"kind": "cuda", "host": "llvm"}))
    assert same(t, Target({"kind": "cuda", "host": {"kind": "llvm"}}))
    assert same(t, Target("cuda -host=llvm"))
    assert str(Target("cuda -arch=sm_90", host="llvm -mcpu=znver4")) == "cuda -arch=sm_90 -host='llvm -mcpu=znver4'"


def test_explicit_host_argument_replaces_the_written_one():
    t = Target("cuda -host=c", host="llvm")
    assert t.host.kind_name == "llvm"
    copy = Target(t, host="c")
    assert copy.host.kind_name == "c" and t.host.kind_name == "llvm"


def test_host_must_be_a_cpu_target_without_host():
    with pytest.raises(TargetError, match="a host target must compile for the CPU"):
        Target("llvm", host="cuda")
    with pytest.raises(TargetError, match="cannot have a host of its own"):
        Target("cuda", host=Target("llvm", host="c"))


def test_with_host_and_copies():
    host = Target("llvm")
    t = Target("cuda").with_host(host)
    assert t.host is host
    assert t.with_host(host) is t  # unchanged: the same object
    assert t.without_host().host is None
    copy = Target(t)
    assert copy is not t and same(copy, t) and copy.host is host


def test_keys_default_user_and_round_trip():
    assert Target("cuda").keys == ("cuda", "gpu")
    t = Target("cuda -keys=tensorcore,gpu")
    assert t.keys == ("tensorcore", "gpu", "cuda")
    assert str(t) == "cuda -keys=tensorcore,gpu,cuda"
    assert same(Target(str(t)), t)
    assert Target({"kind": "llvm", "keys": ["arm_cpu"]}).keys == ("arm_cpu", "cpu")


def test_computed_defaults_from_the_kind():
    seen = []

    def host_defaults(given):
        seen.append(dict(given))
        return {"mcpu": "host-cpu", "num_cores": 4}

    kind = TargetKind("cpux", "cpu", {"mcpu": AttrSpec(str), "num_cores": AttrSpec(int)},
                      default_attrs=host_defaults)
    with override_kinds(kind):
        t = Target("cpux -num_cores=2")
        assert t.attrs == {"mcpu": "host-cpu", "num_cores": 2}  # explicit values win
        assert seen[-1] == {"num_cores": 2}
        assert str(t) == "cpux -num_cores=2"  # computed defaults are left out like static ones
        assert same(Target(str(t)), t)
        assert str(Target("cpux -mcpu=other")) == "cpux -mcpu=other"
    bad = TargetKind("cpuy", "cpu", {"mcpu": AttrSpec(str)}, default_attrs=lambda given: {"mcpu": 3})
    with override_kinds(bad), pytest.raises(TargetError, match="'mcpu' expects str"):
        Target("cpuy")


def test_field_form_is_checked_against_the_schema():
    t = Target("llvm -mcpu=x")
    assert t.with_(attrs={"mcpu": "y"}).attrs == {"mcpu": "y", "opt_level": 3}
    with pytest.raises(TargetError, match="has no attribute 'bogus'"):
        t.with_(attrs={"bogus": 1})
    with pytest.raises(TargetError, match="expects a kind name"):
        Target(kind_name=None, attrs={})
    with pytest.raises(TargetError, match="expects a mapping"):
        Target(kind_name="llvm", attrs=[("mcpu", "x")])


def test_with_target_scopes_nest():
    assert Target.current() is None
    outer, inner = Target("llvm"), Target("cuda")
    with outer as entered:
        assert entered is outer and Target.current() is outer
        with inner:
            assert Target.current() is inner
        assert Target.current() is outer
    assert Target.current(allow_none=True) is None
    with pytest.raises(TargetError, match="no target is in scope"):
        Target.current(allow_none=False)


def test_target_scope_is_per_thread():
    import threading

    seen = []
    with Target("llvm"):
        th = threading.Thread(target=lambda: seen.append(Target.current()))
        th.start()
        th.join()
    assert seen == [None]


def test_out_of_order_exit_is_an_error():
    a, b = Target("llvm"), Target("cuda")
    a.__enter__()
    b.__enter__()
    with pytest.raises(TargetError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert Target.current() is None


def test_json_round_trip_and_structural_hash():
    t = Target("cuda -arch=sm_90 -keys=tc", host="llvm -mattr=+avx2,+fma")
    back = loom.load_json(loom.save_json(t))
    assert isinstance(back, Target) and same(back, t)
    assert back.attrs == t.attrs and back.host.attrs["mattr"] == ("+avx2", "+fma")
    assert loom.structural_hash(back) == loom.structural_hash(t)
    assert not loom.structural_equal(t, Target("cuda -arch=sm_80", host="llvm -mattr=+avx2,+fma"))
    assert not loom.structural_equal(t, t.without_host())


# -- canonical text round trip, over random attribute values ------------------------------

_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
_word = st.text(st.sampled_from("abcxyz019_+-."), min_size=1, max_size=6)
_values = {
    str: _text, int: st.integers(-2**40, 2**40), bool: st.booleans(),
    float: st.floats(allow_nan=False, allow_infinity=False), list: st.lists(_word, max_size=3).map(tuple),
}


@st.composite
def targets(draw, kinds=tuple(k for k in ALL if k.name not in ("interp",))):
    kind = draw(st.sampled_from(kinds))
    names = draw(st.lists(st.sampled_from(sorted(kind.schema)), unique=True)) if kind.schema else []
    attrs = {n: draw(_values[kind.schema[n].type]) for n in names}
    keys = draw(st.lists(_word, max_size=2))
    host = draw(st.one_of(st.none(), st.sampled_from(["llvm", "c -flags='-O2 -g'", "llvm -mcpu=x -mattr=+a"])))
    return Target({"kind": kind.name, **attrs, "keys": keys}, host=host)


@settings(max_examples=250, deadline=None)
@given(targets())
def test_canonical_string_round_trips(t):
    text = str(t)
    back = Target(text)
    assert same(back, t), text
    assert str(back) == text
    assert same(Target(t.export()), t)


def _host_like_defaults(given):
    """Like the llvm plugin: host values only when compiling for the host."""
    out = {"num_cores": 4}
    if given.get("mtriple", "host") == "host":
        out.update(mtriple="host", mcpu="hostcpu")
        if given.get("mcpu", "hostcpu") == "hostcpu":
            out["mattr"] = ("+a", "+b")
    return {k: v for k, v in out.items() if k not in given}


HOSTLIKE = TargetKind("hostlike", "cpu", {"mtriple": AttrSpec(str), "mcpu": AttrSpec(str), "mattr": AttrSpec(list),
                                          "num_cores": AttrSpec(int), "opt_level": AttrSpec(int, 3)},
                      default_attrs=_host_like_defaults)


def test_dependent_computed_defaults_print_what_is_needed():
    with override_kinds(HOSTLIKE):
        assert str(Target("hostlike")) == "hostlike"
        assert Target("hostlike").attrs["mattr"] == ("+a", "+b")
        assert str(Target("hostlike -mcpu=hostcpu -mattr=+a,+b -num_cores=4")) == "hostlike"
        assert str(Target("hostlike -mcpu=other")) == "hostlike -mcpu=other"
        # mcpu equals the bare default, yet must print: without it, -mtriple=arm leaves mcpu unset
        t = Target("hostlike -mtriple=arm -mcpu=hostcpu")
        assert str(t) == "hostlike -mcpu=hostcpu -mtriple=arm"
        assert same(Target(str(t)), t)


@settings(max_examples=250, deadline=None)
@given(st.fixed_dictionaries({}, optional={
    "mtriple": st.sampled_from(["host", "arm"]), "mcpu": st.sampled_from(["hostcpu", "other"]),
    "mattr": st.sampled_from([(), ("+a", "+b"), ("+a",)]), "num_cores": st.sampled_from([1, 4]),
    "opt_level": st.sampled_from([2, 3]),
}))
def test_canonical_string_round_trips_with_computed_defaults(attrs):
    with override_kinds(HOSTLIKE):
        t = Target({"kind": "hostlike", **attrs})
        back = Target(str(t))
        assert same(back, t), str(t)
        assert str(back) == str(t)
