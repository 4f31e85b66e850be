"""The live console: one server for the logs, progress bars and resource usage of every process.

    with mlgoodput.console.session():        # a local multi-process job: children join alone
        logging.info("hello from %s", "main")

Or run `mlgoodput console serve --address :7000` and `mlgoodput.console.connect(...)` from
each process. See docs/console.md.
"""

from mlgoodput.console._api import connect, current_client, disconnect, session
from mlgoodput.console._client import ConsoleClient, ConsoleError
from mlgoodput.console._progress import Progress
from mlgoodput.console._server import ConsoleServer
from mlgoodput.console._usage import Usage

__all__ = [
    "ConsoleClient",
    "ConsoleError",
    "ConsoleServer",
    "Progress",
    "Usage",
    "connect",
    "current_client",
    "disconnect",
    "session",
]
