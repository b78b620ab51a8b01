"""``python -m hiera`` and the ``hiera`` console script.

The command modules are imported inside the guard, so a Ctrl-C that lands
while they load ends with the one-line interrupt message, not a traceback.
"""

import sys


def entry() -> int:
    """Run the ``hiera`` command line on ``sys.argv``; its exit status."""
    try:
        from hiera.cli import main
    except KeyboardInterrupt:
        print("hiera: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(entry())
