"""The installed target kinds the end-to-end suites run on (a helper module: tests/ is on sys.path)."""

import loom


def buildable_kinds() -> list[str]:
    """Installed target kinds whose plugin implements ``loom_backend`` (CPU kinds only here)."""
    out = []
    for info in loom.plugins.list_plugins():
        if info.status == "failed" or "loom_backend" not in info.hooks:
            continue
        for kind in info.target_kinds:
            if loom.target.get_kind(kind).device_type == 1:
                out.append(kind)
    return sorted(out)
