"""The build cache's code state: the walk over source files, in C (loom.driver._tree_state) and in Python."""

from __future__ import annotations

import os
import shutil

import pytest

from loom.driver import build_cache

try:
    from loom.driver import _tree_state as tree_state
except ImportError:  # installed without a C compiler
    tree_state = None  # type: ignore[assignment]

WALKS = [pytest.param(build_cache._tree_text, id="python")]
if tree_state is not None:
    WALKS += [pytest.param(tree_state.tree_text, id="c"),
              pytest.param(lambda folders: tree_state.start(folders).result(), id="c-thread")]


def make_tree(root) -> None:
    """A package-like tree: nested folders, dot files, caches and links."""
    for rel, data in {"a.py": b"x = 1\n", "sub/b.py": b"y = 22\n", "sub/deeper/c.so": b"\0" * 300, "empty.txt": b"",
                      "ünïcode.py": b"z = 3\n"}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for skipped in (".hidden.py", "__pycache__/a.cpython-311.pyc", ".git/config", "sub/__pycache__/b.pyc"):
        path = root / skipped
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"skipped")
    (root / "link.py").symlink_to(root / "a.py")  # a link to a file: the target's size and time
    (root / "linked_folder").symlink_to(root / "sub")  # a link to a folder: stat()ed, not walked
    (root / "empty_folder").mkdir()


def expected(*roots) -> tuple[str, int, str]:
    text, newest, newest_path = "", 0, ""
    for root in roots:
        rows = []
        for rel in ("a.py", "sub/b.py", "sub/deeper/c.so", "empty.txt", "ünïcode.py", "link.py", "linked_folder"):
            st = os.stat(root / rel)
            rows.append((os.path.join(str(root), *rel.split("/")), st.st_size, st.st_mtime_ns))
        rows.sort(key=lambda r: os.fsencode(r[0]))
        text += f"[{root}]\n" + "".join(f"{p}:{size}:{mtime}\n" for p, size, mtime in rows)
        for p, _, mtime in rows:
            if mtime > newest:
                newest, newest_path = mtime, p
    return text, newest, newest_path


@pytest.mark.parametrize("walk", WALKS)
def test_the_walk_lists_every_file_sorted_and_skips_dot_files_and_caches(tmp_path, walk):
    make_tree(tmp_path)
    assert walk([str(tmp_path)]) == expected(tmp_path)


@pytest.mark.parametrize("walk", WALKS)
def test_several_folders_each_under_its_header(tmp_path, walk):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    make_tree(tmp_path / "one")
    make_tree(tmp_path / "two")
    assert walk([str(tmp_path / "two"), str(tmp_path / "one")]) == expected(tmp_path / "two", tmp_path / "one")
    assert walk([]) == ("", 0, "")


@pytest.mark.parametrize("walk", WALKS)
def test_a_trailing_slash_joins_as_os_path_join(tmp_path, walk):
    make_tree(tmp_path)
    text, newest, _ = walk([str(tmp_path) + "/"])
    assert text.splitlines()[0] == f"[{tmp_path}/]"
    assert text.splitlines()[1:] == expected(tmp_path)[0].splitlines()[1:]


@pytest.mark.parametrize("walk", WALKS)
def test_an_edit_in_place_changes_the_state(tmp_path, walk):
    make_tree(tmp_path)
    before = walk([str(tmp_path)])
    path = tmp_path / "sub" / "b.py"
    st = path.stat()
    with open(path, "r+b") as fh:  # same size, same folder entry: only the time tells
        fh.write(b"Y")
    # Ten seconds on, so b.py is surely the newest entry: the folder sub (also seen through linked_folder) changed
    # when make_tree added sub/__pycache__ after b.py, which on a loaded machine can be more than a moment later.
    later = st.st_mtime_ns + 10_000_000_000
    os.utime(path, ns=(st.st_atime_ns, later))
    after = walk([str(tmp_path)])
    assert after != before
    assert after[1:] == (later, str(path))


@pytest.mark.parametrize("walk", WALKS)
def test_a_broken_link_or_a_missing_folder_raises_oserror_naming_it(tmp_path, walk):
    make_tree(tmp_path)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    with pytest.raises(OSError, match="dangling.py"):
        walk([str(tmp_path)])
    with pytest.raises(OSError, match="no such folder"):
        walk([str(tmp_path / "no such folder")])


@pytest.mark.skipif(tree_state is None, reason="no C compiler: the extension is not built")
def test_the_c_walk_agrees_with_the_python_walk_on_loom_itself():
    folders = build_cache._package_dirs()
    assert tree_state.tree_text(folders) == build_cache._tree_text(folders) == tree_state.start(folders).result()


@pytest.mark.skipif(tree_state is None, reason="no C compiler: the extension is not built")
def test_a_walker_never_collected_is_joined_when_freed(tmp_path):
    make_tree(tmp_path)
    for _ in range(50):
        tree_state.start([str(tmp_path)])  # dropped at once: its thread is joined, nothing leaks or crashes
    walker = tree_state.start([str(tmp_path)])
    assert walker.result() == walker.result() == expected(tmp_path)


def test_the_extension_is_built_where_a_compiler_is():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the extension is optional")
    assert tree_state is not None


def test_the_code_state_names_every_package_folder_and_file():
    state = "".join(build_cache._CodeState().lines())
    for folder in build_cache._package_dirs():
        assert f"[{folder}]\n" in state
    assert os.path.join(os.path.dirname(build_cache.__file__), "build_cache.py") + ":" in state


def test_the_code_state_is_the_same_with_either_walk(monkeypatch):
    first = build_cache._CodeState().lines()
    monkeypatch.setitem(__import__("sys").modules, "loom.driver._tree_state", None)  # as if never built
    state = build_cache._CodeState()
    assert state.walker is None
    assert state.lines() == first


def test_a_file_newer_than_the_process_names_it(monkeypatch):
    monkeypatch.setattr(build_cache, "_START", 0.0)
    with pytest.raises(build_cache._Unknown, match="changed after this process started"):
        build_cache._CodeState().lines()
