"""A small MCP server to try Countersign with: a team's notes, kept in memory.

Four tools, with the hints a real server would give:

- `list_notes` and `search_notes` only read (the read-only hint);
- `create_note` adds a note;
- `delete_note` deletes one (the destructive hint).

It is written with FastMCP (`fastmcp`, one of Countersign's development dependencies, so
`uv run` has it) and speaks MCP over stdio: Countersign starts it itself from
`examples/mcp/servers.json`. Try it (docs/tools-and-mcp.md, "Connecting MCP servers")::

    COUNTERSIGN_MCP_CONFIG=examples/mcp/servers.json uv run --frozen countersign chat

The notes live in this process's memory and start as the three below: a restart of the server
forgets what was created or deleted. It reaches no network and writes no file.
"""

from __future__ import annotations

import itertools
from typing import Annotated

from fastmcp import FastMCP
from mcp_types import ToolAnnotations
from pydantic import Field

mcp = FastMCP("notes", instructions="A team's notes: list, search, create and delete them.")

Note = dict[str, str | int]
"""A note as the tools answer it: `{"id": 1, "title": "...", "body": "..."}`."""

_ids = itertools.count(1)
_notes: dict[int, Note] = {}


def _add(title: str, body: str) -> Note:
    note_id = next(_ids)
    _notes[note_id] = {"id": note_id, "title": title, "body": body}
    return _notes[note_id]


for _title, _body in (
    ("Release checklist", "Tag the release, run the migrations, announce it in #releases."),
    ("On-call", "This week: Dana. Escalate to Sam after 30 minutes."),
    ("Office wifi", "Network 'guests', the password is on the fridge."),
):
    _add(_title, _body)


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
def list_notes() -> list[Note]:
    """List every note: its id, title and body."""
    return list(_notes.values())


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
def search_notes(query: Annotated[str, Field(min_length=1, description="words to look for")]) -> list[Note]:
    """Find the notes whose title or body contains `query` (case does not matter)."""
    wanted = query.casefold()
    return [note for note in _notes.values() if wanted in f"{note['title']}\n{note['body']}".casefold()]


@mcp.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
def create_note(
    title: Annotated[str, Field(min_length=1, max_length=200)], body: Annotated[str, Field(max_length=10_000)] = ""
) -> Note:
    """Create a note; returns it with its new id."""
    return _add(title, body)


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False))
def delete_note(note_id: Annotated[int, Field(ge=1, description="the note's id, from list_notes")]) -> str:
    """Delete a note for good."""
    note = _notes.pop(note_id, None)
    if note is None:
        raise ValueError(f"there is no note {note_id}")
    return f"deleted note {note_id} ({note['title']})"


if __name__ == "__main__":
    mcp.run(transport="stdio", show_banner=False)
