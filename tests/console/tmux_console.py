"""A console server running in a real tmux terminal, for tests that read its screen."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from waiting import wait_for

from .conftest import SRC, child_env


@dataclass
class TmuxConsole:
    """The server's address, a flag file its client waits on, and the terminal it runs in."""

    sock: str
    address: str
    flag: str
    clients: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], check=True, capture_output=True, text=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "console")

    def start_client(self, script: str) -> subprocess.Popen[bytes]:
        """Runs `script` with argv (address, flag); it is killed at the end if still running."""
        client = subprocess.Popen([sys.executable, "-c", script, self.address, self.flag], env=child_env())
        self.clients.append(client)
        return client

    def interrupt_server(self) -> None:
        """Ctrl-C in the terminal; returns once the server removed its socket."""
        self.tmux("send-keys", "-t", "console", "C-c", "")
        wait_for(lambda: not os.path.exists(self.address[5:]), what="the server to stop on Ctrl-C")


@contextmanager
def console_in_tmux(sockdir: str, *, name: str, job: str, width: int, module: str) -> Iterator[TmuxConsole]:
    """Starts `python -m <module> serve` for `job` in a fresh tmux server and waits for its
    socket; tmux and any client still running are stopped on the way out."""
    t = TmuxConsole(sock=f"{name}-{os.getpid()}", address=f"unix:{sockdir}/t.sock", flag=f"{sockdir}/go")
    t.tmux("new-session", "-d", "-s", "console", "-x", str(width), "-y", "40")
    try:
        cmd = (
            f"PYTHONPATH={os.path.abspath(SRC)} {sys.executable} -m {module} serve"
            f" --address {t.address} --job {job} --store {sockdir}/store.db"
        )
        t.tmux("send-keys", "-t", "console", cmd, "Enter")
        wait_for(lambda: os.path.exists(t.address[5:]), what="the server socket")
        yield t
    finally:
        for client in t.clients:
            if client.poll() is None:
                client.kill()  # a failed check must not leave a client waiting forever
                client.wait(10)
        subprocess.run(["tmux", "-L", t.sock, "kill-server"], capture_output=True)
