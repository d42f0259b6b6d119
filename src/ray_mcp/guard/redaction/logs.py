"""The server's own logs: every log record of the process, tracebacks and uncaught exceptions, masked."""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Any

from ray_mcp.guard.redaction.masking import redact_text

_log_hook_lock = threading.Lock()
_log_hook_installed = False


def _redact_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: let logging report it as it would
        return record
    redacted = redact_text(message)
    if redacted != message:
        _redact_message(record, redacted)
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)
    return record


def _redact_message(record: logging.LogRecord, redacted: str) -> None:
    """Mask a record's secret, keeping its arguments where it can: formatters such as uvicorn's access log
    unpack ``record.args``, so they stay a tuple of the same length whenever masking them is enough."""
    args = record.args
    if isinstance(args, tuple) and args and isinstance(record.msg, str):
        record.msg = redact_text(record.msg)
        record.args = tuple(redact_text(a) if isinstance(a, str) else a for a in args)
        try:
            if record.getMessage() == redacted:
                return
        except Exception:  # a masked argument no longer fits its %-format
            pass
    record.msg, record.args = redacted, None


def install_log_redaction() -> None:
    """Redact every log record of the process (ray_mcp, mcp, uvicorn, asyncio, Ray), tracebacks included, and
    uncaught exceptions (main thread and other threads). Idempotent."""
    global _log_hook_installed
    with _log_hook_lock:
        if _log_hook_installed:
            return
        make_record = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            return _redact_record(make_record(*args, **kwargs))

        logging.setLogRecordFactory(factory)
        sys.excepthook = _redacting_excepthook
        threading.excepthook = _redacting_thread_excepthook
        _log_hook_installed = True


def _redacting_excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    sys.stderr.write(redact_text("".join(traceback.format_exception(exc_type, exc, tb))))
    sys.stderr.flush()


def _redacting_thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    sys.stderr.write(redact_text(f"Exception in thread {name}:\n{text}"))
    sys.stderr.flush()
