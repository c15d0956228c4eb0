"""Sizes as users write them on the command line ('4096', '64K', '1M', '2.5G', '16GiB':
powers of 1024, memkind's AutoHBW's units), for every option that takes one (--place's
rules, placement sweep's --ranges and --cap, boundness's --stressor-bytes). No imports
beyond the standard library: it is on the launch path."""

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)
EXAMPLES = "4096, 64K, 1M, 16G"


def parse_size(text):
    """Bytes of text, or None where it is not a size."""
    m = _SIZE.fullmatch(text.strip())
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()]) if m else None
