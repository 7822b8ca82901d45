"""Draw a report's plots in a helper process started before the tables exist.

Why: importing matplotlib (about 0.6 s) and drawing (about 2 s of CPU for a 50-host sweep; text
layout dominates) are most of what `report --out` costs. The helper is forked as soon as the
command knows it will plot: it imports matplotlib while this process loads rows and builds the
tables, then draws them (`make_plots` spreads figures over workers forked from the helper, which
inherit its import). fork, not spawn: the helper keeps this process's pandas import instead of
paying for it again. Where fork does not exist the plots are drawn here, after the tables.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType

import pandas as pd

from analysis import forks
from analysis.report.plotfile import Plot

Result = tuple[list[Plot], int]  # the plots, and how many families had none (make_plots)


def _serve(conn: Connection, other_end: Connection) -> None:
    """The helper: import the plotting stack, wait for the tables, send back the plots or the error."""
    other_end.close()  # the report's end, inherited: open here, it would hide the report's exit
    with contextlib.suppress(Exception):  # a failed import fails again below, and is reported then
        import analysis.report.plots  # noqa: F401 - now, while the report loads its rows
    try:
        step, speed, cache_dir = conn.recv()
    except EOFError:  # the report ended without plotting (nothing loaded, or an error)
        return
    try:
        from analysis.report.plots import make_plots

        result: Result | str = make_plots(step, speed, cache_dir)
    except Exception:  # the traceback as text: an exception object may not pickle
        result = traceback.format_exc()
    with contextlib.suppress(BrokenPipeError):  # the report ended without waiting for them
        conn.send(result)


class Plotter:
    """Plots of tables not built yet: `submit` them when they are, collect with `result`.

    A context manager: leaving it ends the helper, asked or not.
    """

    def __init__(self) -> None:
        self._asked: tuple[pd.DataFrame, pd.DataFrame, Path | None] | None = None
        self._result: Result | None = None
        self._conn: Connection | None = None
        self._sending: threading.Thread | None = None
        self._send_error: Exception | None = None
        if not forks.available():
            return
        context = forks.context()
        self._conn, child = context.Pipe()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # else the helper would write out this process's buffered output again
        # Not a daemon: make_plots forks workers of its own, which a daemon may not.
        self._process = context.Process(target=_serve, args=(child, self._conn), name="specsweep-plots")
        with forks.frozen_gc():
            self._process.start()
        child.close()

    def submit(self, step: pd.DataFrame, speed: pd.DataFrame, cache_dir: Path | None = None) -> None:
        """Start drawing the plots of a step table and its host speeds (`cache_dir`: see make_plots)."""
        self._asked = (step, speed, cache_dir)
        if self._conn is not None:
            # From a thread: the helper reads the tables once matplotlib is imported, and until then
            # a send larger than the pipe holds (a 10,000-config table) would keep this process
            # from laying out the text and HTML tables meanwhile.
            self._sending = threading.Thread(target=self._send, name="specsweep-plots-send")
            self._sending.start()

    def _send(self) -> None:
        """Hand the submitted tables to the helper (in the sending thread; `_sent` raises its error)."""
        assert self._conn is not None
        try:
            self._conn.send(self._asked)
        except BrokenPipeError:  # the helper is gone: `result` says so
            pass
        except Exception as exc:  # e.g. a table that does not pickle: the helper would wait forever
            self._send_error = exc

    def _sent(self) -> None:
        """Wait until the tables are with the helper (or it is gone): the pipe is used one way at a time."""
        if self._sending is not None:
            self._sending.join()

    def result(self) -> Result:
        """The plots asked for by `submit`, as `make_plots` returns them (waits for them once)."""
        if self._result is None:
            self._result = self._receive()
        return self._result

    def _receive(self) -> Result:
        """The helper's answer, or the plots drawn here where there is no helper."""
        if self._conn is None:
            from analysis.report.plots import make_plots

            assert self._asked is not None, "submit before result"
            return make_plots(*self._asked)
        self._sent()
        if self._send_error is not None:
            raise RuntimeError("the tables could not be handed to the plot helper") from self._send_error
        try:
            answer: Result | str = self._conn.recv()
        except EOFError:
            self._process.join()
            answer = f"the plot helper ended without an answer (exit code {self._process.exitcode})"
        if isinstance(answer, str):
            raise RuntimeError(f"drawing the plots failed:\n{answer}")
        return answer

    def __enter__(self) -> Plotter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._conn is not None:
            # A helper still waiting for tables sees the end and exits; one drawing them finds
            # nobody to send them to when it is done. Not killed: its own workers would be left.
            self._sent()
            self._conn.close()
            self._process.join()
