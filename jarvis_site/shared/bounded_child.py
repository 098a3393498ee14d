"""The child side of `bounded.run_bounded`: limit this process, then run the function.

`python -m jarvis_site.shared.bounded_child <module:function> <params JSON> <cpu sec>
<memory bytes>`; the bytes to read come on stdin, the function writes on stdout. Nothing
but the standard library is imported before the limits are set.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1


def _limit(cpu_sec: int, memory_bytes: int) -> None:
    # SIGXCPU at the soft limit ends the process (its default action); the hard limit, a
    # second later, is SIGKILL for a process that ignored it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_sec, cpu_sec + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Dies with the server thread that started it, even one killed outright.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the wall clock and the CPU limit still stop it


def main(argv: list[str]) -> int:
    target, params, cpu_sec, memory_bytes = argv
    _limit(int(cpu_sec), int(memory_bytes))
    from jarvis_site.shared.bounded import EXIT_MEMORY

    module_name, _, function_name = target.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        function(sys.stdin.buffer.read(), sys.stdout.buffer, **json.loads(params))
        sys.stdout.buffer.flush()
    except MemoryError:
        return EXIT_MEMORY
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
