import signal
import sys

from .scenarios import main


def stop(number, frame):
    # SIGTERM (bench/fleet.sh's timeout) unwinds like Ctrl-C: every Stack stops what it started.
    raise SystemExit(128 + number)


signal.signal(signal.SIGTERM, stop)
sys.exit(main(sys.argv[1:]))
