"""Keep every core busy while a command runs: `make test-stress`.

    python scripts/cpu_burn.py --runs 3 -- python -m pytest
    python scripts/cpu_burn.py              # burn until Ctrl-C

Starts one busy-looping process per core, runs the command `--runs` times in a row (each run
whatever the one before it did), then stops the burners — also when a run fails, on Ctrl-C
and on SIGTERM. Exits 1 if any run failed. A test that passes on an idle machine and fails
here waits on the wall clock somewhere (a sleep to let a race happen, a timed assertion, a
guard too short for a loaded machine).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys


def _burn(parent: int) -> None:
    # Only the parent stops a burner: Ctrl-C reaches the whole process group, and the parent
    # must be the one to decide. A burner whose parent died (SIGKILL) stops by itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.getppid() == parent:
        for _ in range(1_000_000):
            pass


def start_burners(count: int) -> list[multiprocessing.Process]:
    burners = [
        multiprocessing.Process(target=_burn, args=(os.getpid(),), daemon=True)
        for _ in range(count)
    ]
    for burner in burners:
        burner.start()
    return burners


def stop_burners(burners: list[multiprocessing.Process]) -> None:
    for burner in burners:
        burner.terminate()
    for burner in burners:
        burner.join(10)
        if burner.is_alive():
            burner.kill()
            burner.join()


def run_repeatedly(command: list[str], runs: int) -> list[int]:
    codes = []
    for number in range(1, runs + 1):
        print(f"== run {number} of {runs} under CPU load: {' '.join(command)}", flush=True)
        codes.append(subprocess.call(command))
    return codes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="how many times to run the command")
    parser.add_argument(
        "--burners", type=int, default=os.cpu_count() or 1, help="busy processes (one per core)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command

    # SIGTERM ends the script through the `finally` below, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    burners = start_burners(options.burners)
    print(f"== {len(burners)} busy processes started", flush=True)
    try:
        if not command:
            signal.pause()
            return 0
        codes = run_repeatedly(command, options.runs)
    except KeyboardInterrupt:
        return 130
    finally:
        stop_burners(burners)
        print("== busy processes stopped", flush=True)
    failed = [number for number, code in enumerate(codes, start=1) if code != 0]
    print(f"== {options.runs - len(failed)} of {options.runs} runs passed", flush=True)
    if failed:
        print(f"== failed: run(s) {', '.join(map(str, failed))}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
