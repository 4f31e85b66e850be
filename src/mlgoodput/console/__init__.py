"""The live console: one server for the logs, progress bars and resource usage of every process.

    with mlgoodput.console.session():        # a local multi-process job: children join alone
        logging.info("hello from %s", "main")

Or run `mlgoodput console serve --address :7000` and `mlgoodput.console.connect(...)` from
each process. See docs/console.md.
"""

from mlgoodput.console._api import connect, disconnect, session
from mlgoodput.console._client import ConsoleClient, ConsoleError
from mlgoodput.console._current import current_client
from mlgoodput.console._display import clean
from mlgoodput.console._progress import Progress
from mlgoodput.console._replay import log_entries_after
from mlgoodput.console._report import write_usage_report
from mlgoodput.console._server import ConsoleServer
from mlgoodput.console._sink import NAMESPACE
from mlgoodput.console._usage import Usage

__all__ = [
    "NAMESPACE",
    "ConsoleClient",
    "ConsoleError",
    "ConsoleServer",
    "Progress",
    "Usage",
    "clean",
    "connect",
    "current_client",
    "disconnect",
    "log_entries_after",
    "session",
    "write_usage_report",
]
