"""Which folder each source gets under OUT: stable across runs, never shared."""

from __future__ import annotations

from pathlib import Path

from hpdparse.store.output_store import OutputStore
from hpdparse.store.state import DocumentState, SourceIdentity
from hpdparse.store.statuses import STATUS_CONVERTED


def state_of(src: Path, stem: str) -> DocumentState:
    return DocumentState(
        source=SourceIdentity.of(src),
        stem=stem,
        page_count=1,
        pages_spec=None,
        selected=[1],
        dpi=200,
        engine="openai",
        model="m",
        revision=None,
        reuse_key=None,
        render_options={},
        status=STATUS_CONVERTED,
    )


def test_duplicate_stems_get_distinct_stable_folders(tmp_path: Path) -> None:
    a = tmp_path / "a" / "x.pdf"
    b = tmp_path / "b" / "x.pdf"
    c = tmp_path / "c" / "y.pdf"
    for p in (a, b, c):
        p.parent.mkdir()
        p.write_bytes(b"%PDF-1.4")
    out = tmp_path / "out"
    store = OutputStore(out)

    def locations(sources: list[Path]) -> dict[Path, Path]:
        return {src: Path(f.location) for src, f in store.assign_folders(sources).items()}

    dirs = locations([b, c, a])
    assert dirs[c] == out / "y"
    assert dirs[a] == out / "x"  # first in path order gets the plain stem
    assert dirs[b].parent == out and dirs[b].name.startswith("x-") and len(dirs[b].name) == 10
    assert locations([a, b, c]) == dirs  # input order does not matter
    # b converted alone first owns out/x; later runs with both keep it there.
    folder = store.folder("x")
    folder.create()
    folder.save_state(state_of(b, "x"))
    again = locations([a, b])
    assert again[b] == out / "x"
    assert again[a].name.startswith("x-") and again[a] != dirs[b]
    assert locations([a])[a] == again[a]  # out/x is b's even when b is absent
