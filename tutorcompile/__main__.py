"""Command line: ``python -m tutorcompile doctor``."""

import argparse
import sys

from .environment import doctor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tutorcompile",
                                     description="tutorcompile command line tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="show what this machine has and what each stage will use")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        doctor()
    return 0


if __name__ == "__main__":
    sys.exit(main())
