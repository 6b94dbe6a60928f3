# SPDX-License-Identifier: Apache-2.0
"""When C memory may be freed while other threads compute on it.

A ctypes call releases the GIL, so one thread's close() can free a model's
mapping, a plan or a device weight while another thread's C call still
reads it. Every call into C that uses an object's memory runs inside
`with life.use():`; close() marks the object closed at once (no new use
starts) and its release runs when the last running use ends, in the thread
that ends it, or at once when none runs. Objects that other objects borrow
for their whole life (a device weight under its plans) count those as uses
too (enter/exit), and their close refuses while any is left.

The torch level's CUDA plans do without it on their runs: a run holds a
reference to the plan's handle (_torch._PlanHandle), which destroys the plan
when the last reference goes, so the eager path pays no lock per call.
"""

import threading


class Lifetime:
    """The uses of one C object and its release."""

    def __init__(self, closed_error):
        self._lock = threading.Lock()
        self._uses = 0
        self._closed = False
        self._release = None
        # callable: the exception a use of the closed object raises (a
        # ValueError or one of its subclasses)
        self._closed_error = closed_error

    @property
    def closed(self):
        return self._closed

    @property
    def uses(self):
        """Uses running now (calls and long-lived borrowers)."""
        return self._uses

    def enter(self, closed_error=None):
        """Starts a use; once closed raises `closed_error()` (a callable
        giving the exception) or the object's own."""
        with self._lock:
            if not self._closed:
                self._uses += 1
                return
        raise (closed_error or self._closed_error)()

    def exit(self):
        """Ends a use; the last one after close() runs the release."""
        with self._lock:
            self._uses -= 1
            release = self._release if self._closed and self._uses == 0 else None
            if release is not None:
                self._release = None
        if release is not None:
            release()

    def use(self, closed_error=None):
        """`with life.use():` around a call into C."""
        return _Use(self, closed_error)

    def close(self, release, refuse=None):
        """Marks the object closed and runs `release()` now or when the last
        running use ends. With `refuse` (a callable giving a message), a
        close while uses run raises RuntimeError with that message instead,
        and the object stays open. A second close does nothing; returns
        True when this call closed it."""
        with self._lock:
            if self._closed:
                return False
            if self._uses and refuse is not None:
                raise RuntimeError(refuse(self._uses))
            self._closed = True
            if self._uses:
                self._release = release
                return True
        release()
        return True


class _Use:
    __slots__ = ("_life", "_error")

    def __init__(self, life, closed_error):
        self._life = life
        self._error = closed_error

    def __enter__(self):
        self._life.enter(self._error)
        return self

    def __exit__(self, *exc):
        self._life.exit()
        return False
