"""The example notes MCP server, counting its starts: `python -m bench.mcp_server STARTS_FILE`.

`bench.mcp_turns` starts it (through Countersign's MCP servers file, and through the bare stack's
fastmcp client) instead of `examples/mcp/notes_server.py` directly, so that the report can say
how many server processes a run started: each start appends one line to `STARTS_FILE`, then the
example runs as its own `__main__` (MCP over stdio).
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mcp" / "notes_server.py"


def main() -> None:
    """Note this start, then run the example server until its client leaves."""
    with Path(sys.argv[1]).open("a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")
    runpy.run_path(str(EXAMPLE), run_name="__main__")


if __name__ == "__main__":
    main()
