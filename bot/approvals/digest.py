"""A stable digest of tool-call arguments: what an approval is bound to."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def args_digest(args: Mapping[str, Any]) -> str:
    """SHA-256 of the arguments as canonical JSON (sorted keys, no spaces), hex.

    Two argument sets with the same digest are the same call for approval purposes; the tool
    runs only when the digest of what it is about to run equals the approved one (issue 4).
    """
    canonical = json.dumps(dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
