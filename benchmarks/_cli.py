"""What every benchmark's command line shares: integer lists, the store and data options.

parser.add_argument("--sizes", type=positive_ints, default=[100, 1000])
add_store_options(parser)          # --postgres URL, --data PATH
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _data import default_data_path

__all__ = ["POSTGRES_ENV", "add_store_options", "positive_ints"]

POSTGRES_ENV = "WORKINGMEM_TEST_POSTGRES_URL"
"""Where `scripts/with-postgres` puts its throwaway cluster's URL."""


def positive_ints(text: str) -> list[int]:
    """``"10,1_000,10000"`` -> [10, 1000, 10000]: sorted, unique, each at least 1."""
    try:
        values = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"values must be positive integers: {text!r}")
    return values


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--postgres URL`` (default: the test cluster's, else not measured) and ``--data``."""
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=os.environ.get(POSTGRES_ENV),
        help=f"PostgreSQL URL (default: ${POSTGRES_ENV}; unset: PostgreSQL is not measured)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=default_data_path(),
        help="LoCoMo JSON (default: ../shared/data/locomo-dev.json from the repository root)",
    )
