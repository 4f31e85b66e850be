"""Every shell command in the README and docs is either run here, as written, or marked as
one that is shown only (with the reason).

A fenced block is marked by an HTML comment on the line before it: `<!-- docs: run -->`
(bash blocks run in bash, python blocks as a script) or `<!-- docs: show (why) -->`. The
runnable blocks of one page run in order in one fresh folder, with a fresh home and data
folder (so the default store starts empty), `export` lines carried from block to block,
and this environment's `bin` first on the PATH, as after `source .venv/bin/activate`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_MARK = re.compile(r"<!--\s*docs:\s*(run|show)\b[^>]*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    mark: str | None  # "run", "show" or None


def blocks(page: Path) -> list[Block]:
    src = page.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(src):
        before = src[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        out.append(
            Block(page, src[: m.start()].count("\n") + 1, m.group(1), m.group(2), mark.group(1) if mark else None)
        )
    return out


def _is_shell(b: Block) -> bool:
    """A shell block: labelled so, or unlabelled with a command on its first line."""
    first = b.text.lstrip().split(" ", 1)[0]
    return b.lang in SHELL or (not b.lang and first in ("mlgoodput", "make", "tensorboard", "pip", "python", "$"))


def _shell_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_every_shell_block_is_marked_and_no_command_hides_in_an_indented_block() -> None:
    unmarked = [f"{b.page.name}:{b.line}" for p in PAGES for b in blocks(p) if _is_shell(b) and b.mark is None]
    assert not unmarked, f"shell blocks without <!-- docs: run --> or <!-- docs: show (why) -->: {unmarked}"
    indented = [
        f"{p.name}:{i + 1}"
        for p in PAGES
        for i, ln in enumerate(p.read_text().splitlines())
        if re.match(r"^ {4}(\$ )?(mlgoodput|make|tensorboard|pip) ", ln)
    ]
    assert not indented, f"commands in indented blocks (fence them and mark them): {indented}"


RUNNABLE = [p for p in PAGES if any(b.mark == "run" for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_commands_run_as_written(page: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLGOODPUT_")}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]),
    )
    exports: list[str] = []
    ran = 0
    for b in blocks(page):
        if b.mark != "run":
            continue
        where = f"{page.name}:{b.line}"
        if b.lang == "python":
            script = work / f"example_{b.line}.py"
            script.write_text(b.text)
            cmd = ["bash", "-c", "\n".join([*exports, f'exec python "{script}"'])]
        else:
            assert b.lang in SHELL, where
            lines = _shell_lines(b.text)
            exports += [ln for ln in lines if ln.startswith("export ")]
            cmd = ["bash", "-e", "-o", "pipefail", "-c", "\n".join([*exports, b.text])]
        res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode == 0, f"{where} failed ({res.returncode}):\n{out[-3000:]}"
        assert "Traceback" not in out, f"{where}:\n{out[-3000:]}"
        ran += 1
    assert ran
