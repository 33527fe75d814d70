"""A user's env failing, told in one line that points at the user's code.

An exception raised inside a user's env (its module, constructor, reset or step) becomes
an EnvError: the exception's type and message and the innermost frame of its traceback
in the user's own code (outside distrl, gymnasium, Ray, numpy, torch and the standard
library). The original stays the EnvError's cause, so Python (and ``--debug``) still
shows the whole traceback. An error with no frame of the user's is distrl's or a
library's own and passes unchanged.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
import traceback
from types import TracebackType

LIBRARIES = ("distrl", "gymnasium", "ray", "numpy", "torch", "cloudpickle")
DEBUG_VAR = "DISTRL_DEBUG"
"""Set to 1 to see the full traceback of an error instead of its one line."""


class EnvError(RuntimeError):
    """An exception raised inside a user's env; the message is one line naming it."""


def _library_dirs() -> tuple[str, ...]:
    """Directories of the libraries' packages (found without importing them: Ray stays
    out of this process unless it is already in)."""
    dirs = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        dirs += list(spec.submodule_search_locations or []) if spec else []
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs)


_LIBRARY_DIRS = _library_dirs()
_STDLIB = tuple(os.path.join(os.path.realpath(sysconfig.get_paths()[k]), "")
                for k in ("stdlib", "platstdlib"))


def _in_library(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    path = os.path.realpath(filename)
    if path.startswith(_LIBRARY_DIRS):
        return True
    # Installed packages may live under the standard library's directory: they are
    # the user's unless they are one of LIBRARIES.
    return path.startswith(_STDLIB) and "-packages" + os.sep not in path


def user_frame(err: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``err``'s traceback in the user's code, or None."""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if not _in_library(frame.filename):
            return frame
    return None


def env_error(err: BaseException, env_name: str) -> EnvError | None:
    """``err`` as one line naming the env, the error and the user's file:line; None when
    no frame of the traceback is the user's (then it is no error of the user's env)."""
    if isinstance(err, EnvError) or not isinstance(err, Exception):
        return None
    frame = user_frame(err)
    if frame is None:
        return None
    message = " ".join(str(err).split())  # one line
    return EnvError(f"env {env_name!r} raised {type(err).__name__}"
                    + (f": {message}" if message else "")
                    + f" at {frame.filename}:{frame.lineno} (in {frame.name}); --debug or "
                    f"{DEBUG_VAR}=1 shows the traceback")


class EnvErrors:
    """``with EnvErrors(name):`` around calls into a user's env: an exception raised in
    the user's code leaves as an EnvError (see env_error). A class, not a generator,
    so that wrapping every step costs next to nothing."""

    def __init__(self, env_name: str):
        self.env_name = env_name

    def __enter__(self) -> EnvErrors:
        return self

    def __exit__(self, kind: type | None, err: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if err is not None and (user := env_error(err, self.env_name)) is not None:
            raise user from err
        return False


def debug_wanted(args: list[str] | tuple[str, ...] = ()) -> bool:
    """``--debug`` among the command's flags, or ``DISTRL_DEBUG`` set (and not 0): show
    full tracebacks."""
    return "--debug" in args or os.environ.get(DEBUG_VAR, "") not in ("", "0")
