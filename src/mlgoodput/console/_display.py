"""The server's screen: log lines printed above live progress bars, throttled, rendered with rich.

The screen is a view, not the record: when lines arrive faster than a person can read,
it shows the newest and counts the rest (all of them are in the store).
"""

from __future__ import annotations

import collections
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from mlgoodput._format import timestamp
from mlgoodput._worker import BackgroundWorker
from mlgoodput.console._protocol import LogRec, ProgressRec

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")
_LEVEL_STYLE = {10: "dim cyan", 20: "green", 30: "yellow", 40: "bold red", 50: "bold white on red"}


def clean(text: str) -> str:
    """Text safe for a terminal: control characters (escape sequences) removed."""
    return _CONTROL.sub("", text)


def level_name(level: int) -> str:
    import logging

    return logging.getLevelName(level) if isinstance(logging.getLevelName(level), str) else str(level)


@dataclass(slots=True)
class BarState:
    """What the server knows of one progress bar."""

    desc: str
    total: float | None
    completed: float = 0.0
    process: int = 0
    distributed: bool = False
    done: bool = False
    lost: bool = False
    updated: float = field(default_factory=time.monotonic)

    @property
    def interrupted(self) -> bool:
        """Closed before reaching its total (Ctrl-C, an exception, an early stop)."""
        return self.done and self.total is not None and self.completed < self.total


class Display(BackgroundWorker):
    """Renders at about 10 frames a second on `file` (a terminal gets live bars)."""

    after_fork = "stop"  # the screen belongs to the server's process

    def __init__(
        self,
        file: IO[str] | None = None,
        *,
        max_lines_per_frame: int = 25,
        goodput: Callable[[], str | None] | None = None,
        goodput_every_s: float = 5.0,
    ) -> None:
        super().__init__("mlgoodput-console-display", interval_s=0.1, max_backoff_s=1.0)
        try:
            from rich.console import Console
        except ImportError:
            raise ImportError("the console screen needs rich: pip install 'mlgoodput[console]'") from None

        self.console = Console(file=file, highlight=False, soft_wrap=False)
        if not self.console.is_terminal:
            self.console.soft_wrap = True  # a file or a pipe: one record, one line, never cut
        self._lines: collections.deque[tuple[int, LogRec]] = collections.deque(maxlen=max_lines_per_frame)
        self._skipped = 0
        self._notes: collections.deque[str] = collections.deque(maxlen=200)
        self.bars: dict[str, BarState] = {}
        self._usage: dict[int, Any] = {}  # process -> newest UsageRec
        self._lock = threading.Lock()
        self._live: Any = None
        self._goodput = goodput
        self._goodput_every_s = goodput_every_s
        self._goodput_next = 0.0
        self._goodput_text: str | None = None
        self.lines_seen = 0

    # -- fed by the server (any thread) ----------------------------------------------------
    def log(self, process: int, rec: LogRec) -> None:
        self.lines_seen += 1
        if len(self._lines) == self._lines.maxlen:
            self._skipped += 1
        self._lines.append((process, rec))

    def note(self, text: str) -> None:
        """A line from the server itself (a client joined, a bad frame, ...)."""
        self._notes.append(text)

    def progress(self, process: int, rec: ProgressRec, bar: BarState) -> None:
        with self._lock:
            self.bars[rec.bar] = bar

    def usage(self, process: int, rec: Any) -> None:
        """The newest usage sample of a process, shown under the bars (a terminal only)."""
        with self._lock:
            self._usage[process] = rec

    def mark_lost(self, process: int, lost: bool) -> None:
        with self._lock:
            for b in self.bars.values():
                if b.process == process and not b.done:
                    b.lost = lost

    # -- rendering -------------------------------------------------------------------------
    def _render_line(self, process: int, rec: LogRec) -> Any:
        from rich.text import Text

        t = Text()
        t.append(timestamp(rec.time)[11:19], style="dim")  # the clock in UTC, as every screen
        t.append(f" [#{process}] ", style="cyan")
        t.append(f"{level_name(rec.level):<8}", style=_LEVEL_STYLE.get(rec.level, ""))
        t.append(" ")
        if rec.ansi:
            t.append_text(Text.from_ansi(rec.ansi))
        else:
            t.append(clean(rec.msg))
        if rec.exc:
            t.append("\n" + clean(rec.exc), style="red")
        src = clean(f"{os.path.basename(rec.file)}:{rec.line}")
        path = clean(rec.file)
        t.append("  ")
        t.append(src, style=f"dim link file://{path}" if path.startswith("/") and " " not in path else "dim")
        return t

    def _bars_view(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 1))
        with self._lock:
            bars = list(self.bars.items())
        for _, b in bars[-12:]:
            if b.lost:
                state = Text("lost", style="bold red")
            elif b.interrupted:
                state = Text("interrupted", style="bold yellow")
            else:
                state = Text("done", style="green") if b.done else Text("")
            total = f"{b.total:g}" if b.total is not None else "?"
            grid.add_row(
                Text(clean(b.desc)[:40]),
                ProgressBar(total=b.total, completed=b.completed, width=30),
                Text(f"{b.completed:g}/{total}"),
                Text(f"[#{b.process}]" if not b.distributed else "[shared]", style="cyan"),
                state,
            )
        with self._lock:
            usage = sorted(self._usage.items())
        now = time.time()
        for process, u in usage[-8:]:
            if now - u.time > 30:
                continue  # a process that stopped sampling (or ended) drops out
            text = f"cpu {u.cpu:.0f}% · rss {u.rss / 2**20:,.0f} MiB"
            if u.gpu_util is not None:
                text += f" · gpu {u.gpu_util:.0f}%"
            if u.gpu_mem is not None:
                text += f" · gpu mem {u.gpu_mem / 2**20:,.0f} MiB"
            grid.add_row(
                Text("usage", style="dim"), Text(text), Text(""), Text(f"[#{process}]", style="cyan"), Text("")
            )
        if self._goodput_text:
            grid.add_row(Text(self._goodput_text, style="bold magenta"))
        return grid

    def _work(self) -> bool:
        con = self.console
        lines: list[tuple[int, LogRec]] = []
        while True:
            try:
                lines.append(self._lines.popleft())
            except IndexError:
                break
        skipped, self._skipped = self._skipped, 0
        notes: list[str] = []
        while True:
            try:
                notes.append(self._notes.popleft())
            except IndexError:
                break
        now = time.monotonic()
        if self._goodput is not None and now >= self._goodput_next:
            self._goodput_next = now + self._goodput_every_s
            try:
                text = self._goodput()
            except Exception:
                text = None
            if text and text != self._goodput_text and not con.is_terminal:
                self._notes.append(text)  # no live area: the line goes with the log
            self._goodput_text = text
        # drop finished bars after a while, so the live area stays small
        with self._lock:
            # (an interrupted bar stays longer, so the person sees where it stopped)
            for k in [k for k, b in self.bars.items() if b.done and now - b.updated > (30.0 if b.interrupted else 3.0)]:
                del self.bars[k]
        if con.is_terminal and self._live is None:
            from rich.live import Live

            self._live = Live(self._bars_view(), console=con, refresh_per_second=10, auto_refresh=False)
            self._live.start()
        from rich.text import Text

        for n in notes:
            con.print(Text(clean(n), style="dim italic"))
        if skipped:
            con.print(Text(f"… {skipped} lines not shown here (all are stored; `mlgoodput console logs`)", style="dim"))
        for process, rec in lines:
            con.print(self._render_line(process, rec))
        if self._live is not None:
            self._live.update(self._bars_view(), refresh=True)
        elif not con.is_terminal:
            con.file.flush()
        return True

    def _on_fork_in_child(self) -> None:
        # the screen belongs to the server's process: a forked child never draws on it
        self._live = None
        self._lines.clear()
        self._notes.clear()

    def _on_close(self, timeout_s: float) -> None:
        if self._live is not None:
            try:
                self._live.stop()
            except Exception:
                pass
            self._live = None
