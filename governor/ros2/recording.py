"""MCAP recordings of governor's ROS 2 messages, written without ROS.

The file uses the ``ros2`` profile, CDR messages and ``ros2msg`` schemas from the shipped
definitions, so Foxglove and ``ros2 bag`` open it beside the robot's own bags. Log times are
wall-clock nanoseconds; :class:`TimeBase` maps a device's clock (a simulated board's virtual
time too) onto the wall clock at the start. Needs the PyPI packages ``mcap`` and
``mcap-ros2-support`` (``pip install 'gpu-governor[mcap]'``), imported only when recording.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from governor.errors import GovernorError, InvalidRequestError

__all__ = ["Recorder", "TimeBase", "read_messages"]

INSTALL_HINT = "pip install 'gpu-governor[mcap]' (or: pip install mcap mcap-ros2-support)"


def _writer_class() -> Any:
    try:
        from mcap_ros2.writer import Writer
    except ImportError:
        raise GovernorError(
            f"recording MCAP needs the mcap and mcap-ros2-support packages: {INSTALL_HINT}"
        ) from None
    return Writer


class TimeBase:
    """Device time (s, any origin) to wall-clock nanoseconds, fixed at creation."""

    def __init__(self, device_now_s: float, wall_ns: Optional[int] = None) -> None:
        self.device_start_s = float(device_now_s)
        self.wall_start_ns = time.time_ns() if wall_ns is None else int(wall_ns)

    def ns(self, device_t_s: float) -> int:
        return self.wall_start_ns + int(round((float(device_t_s) - self.device_start_s) * 1e9))


class Recorder:
    """Writes ROS 2 messages (as dictionaries) to an MCAP file; ``close()`` finishes it.

    Raises:
        GovernorError: mcap / mcap-ros2-support are not installed.
        InvalidRequestError: the file cannot be created.
    """

    def __init__(self, path: Union[str, Path]) -> None:
        writer_class = _writer_class()
        self.path = Path(path)
        try:
            self._file = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        except OSError as err:
            raise InvalidRequestError(
                f"cannot write the recording {self.path}: {err.strerror or err}"
            ) from None
        self._writer = writer_class(self._file)
        self._schemas: Dict[str, Any] = {}
        self.count = 0
        self._closed = False

    def _schema(self, datatype: str) -> Any:
        schema = self._schemas.get(datatype)
        if schema is None:
            from governor.ros2.interfaces import schema_text

            schema = self._writer.register_msgdef(datatype, schema_text(datatype))
            self._schemas[datatype] = schema
        return schema

    def write(self, topic: str, datatype: str, message: Mapping[str, Any], time_ns: int) -> None:
        """Record ``message`` (a dict of the shipped definition) on ``topic`` at ``time_ns``."""
        if self._closed:
            return
        self._writer.write_message(
            topic, self._schema(datatype), message, log_time=int(time_ns), publish_time=int(time_ns)
        )
        self.count += 1

    def close(self) -> None:
        """Write the summary and close the file (safe to repeat)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.finish()
        finally:
            self._file.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_messages(path: Union[str, Path]):
    """Yield ``(topic, datatype, log_time_ns, message)`` from an MCAP recording, decoded
    with its own schemas (for tests and scripts)."""
    try:
        from mcap.reader import make_reader
        from mcap_ros2.decoder import DecoderFactory
    except ImportError:
        raise GovernorError(
            f"reading MCAP needs the mcap and mcap-ros2-support packages: {INSTALL_HINT}"
        ) from None
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            # a channel without a schema (allowed by MCAP) has no type name to give
            yield channel.topic, schema.name if schema else "", message.log_time, decoded
