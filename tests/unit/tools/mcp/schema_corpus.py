"""Input schemas shaped like those of well-known public MCP servers, written here (not downloaded).

Each usable entry comes with arguments that are valid under the server's own schema; each
unusable one with the words its refusal must contain. The shapes follow what each server's
toolchain emits: hand-written JSON (the Go GitHub server, the reference Slack and Postgres
servers), zod-to-json-schema (`$schema` draft-07, `additionalProperties: false`, `type` lists,
`#/properties/...` pointers, `const` unions), and pydantic under FastMCP (`$defs`, `$ref` with
siblings, `anyOf` with null, `title`s, exclusive bounds, `prefixItems`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


@dataclass(frozen=True)
class Usable:
    """A tool whose schema can be declared, with arguments its server accepts."""

    tool: str
    schema: dict[str, Any]
    valid_arguments: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Unusable:
    """A tool whose schema cannot be declared, and words its refusal must contain."""

    tool: str
    schema: dict[str, Any]
    reason: str


GITHUB_CREATE_ISSUE = Usable(
    "github__create_issue",
    {
        "type": "object",
        "properties": {
            "owner": {"type": "string", "description": "Repository owner"},
            "repo": {"type": "string", "description": "Repository name"},
            "title": {"type": "string", "description": "Issue title"},
            "body": {"type": "string", "description": "Issue body content"},
            "assignees": {"type": "array", "description": "Usernames to assign", "items": {"type": "string"}},
            "labels": {"type": "array", "description": "Labels to apply", "items": {"type": "string"}},
            "milestone": {"type": "number", "description": "Milestone number"},
        },
        "required": ["owner", "repo", "title"],
    },
    [
        {"owner": "acme", "repo": "api", "title": "Crash on start"},
        {"owner": "acme", "repo": "api", "title": "x", "labels": ["bug"], "assignees": [], "milestone": 3},
    ],
)

GITHUB_LIST_ISSUES = Usable(
    "github__list_issues",
    {
        "type": "object",
        "properties": {
            "owner": {"type": "string"},
            "repo": {"type": "string"},
            "state": {"type": "string", "enum": ["open", "closed", "all"], "description": "Filter by state"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "since": {"type": "string", "description": "ISO 8601 timestamp", "format": "date-time"},
            "page": {"type": "number", "minimum": 1, "description": "Page number for pagination (min 1)"},
            "perPage": {"type": "number", "minimum": 1, "maximum": 100, "description": "Results per page"},
        },
        "required": ["owner", "repo"],
    },
    [{"owner": "acme", "repo": "api"}, {"owner": "a", "repo": "b", "state": "all", "page": 2, "perPage": 100}],
)

GITHUB_CREATE_REVIEW = Usable(
    "github__create_pull_request_review",
    {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "owner": {"type": "string"},
            "repo": {"type": "string"},
            "pull_number": {"type": "number"},
            "body": {"type": "string"},
            "event": {"type": "string", "enum": ["APPROVE", "REQUEST_CHANGES", "COMMENT"]},
            "comments": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "position": {"type": "number"},
                                "body": {"type": "string"},
                            },
                            "required": ["path", "position", "body"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "line": {"type": "number"},
                                "body": {"type": "string"},
                            },
                            "required": ["path", "line", "body"],
                            "additionalProperties": False,
                        },
                    ]
                },
            },
        },
        "required": ["owner", "repo", "pull_number", "body", "event"],
        "additionalProperties": False,
    },
    [
        {
            "owner": "acme",
            "repo": "api",
            "pull_number": 7,
            "body": "LGTM",
            "event": "APPROVE",
            "comments": [{"path": "a.py", "line": 3, "body": "nit"}, {"path": "b.py", "position": 1, "body": "?"}],
        }
    ],
)

FILESYSTEM_EDIT_FILE = Usable(
    "filesystem__edit_file",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "oldText": {"type": "string", "description": "Text to search for - must match exactly"},
                        "newText": {"type": "string", "description": "Text to replace with"},
                    },
                    "required": ["oldText", "newText"],
                    "additionalProperties": False,
                },
            },
            "dryRun": {"type": "boolean", "default": False, "description": "Preview changes using git-style diff"},
        },
        "required": ["path", "edits"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{"path": "/srv/a.txt", "edits": [{"oldText": "a", "newText": "b"}]}, {"path": "x", "edits": [], "dryRun": True}],
)

FILESYSTEM_LIST_ALLOWED = Usable(
    "filesystem__list_allowed_directories",
    {"type": "object", "properties": {}, "required": [], "additionalProperties": False, "$schema": DRAFT_07},
    [{}],
)

FILESYSTEM_READ_MULTIPLE = Usable(
    "filesystem__read_multiple_files",
    {
        "type": "object",
        "properties": {"paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
        "required": ["paths"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{"paths": ["/a", "/b"]}],
)

JIRA_CREATE_ISSUE = Usable(
    "jira__jira_create_issue",
    {
        "properties": {
            "project_key": {
                "description": "The JIRA project key (e.g. 'PROJ')",
                "title": "Project Key",
                "type": "string",
            },
            "summary": {"description": "Summary/title of the issue", "title": "Summary", "type": "string"},
            "issue_type": {"description": "Issue type (e.g. 'Task', 'Bug')", "title": "Issue Type", "type": "string"},
            "assignee": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "Assignee's user identifier",
                "title": "Assignee",
            },
            "components": {
                "anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}],
                "default": None,
                "title": "Components",
            },
            "additional_fields": {
                "anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "Other fields, as an object or as JSON text",
                "title": "Additional Fields",
            },
        },
        "required": ["project_key", "summary", "issue_type"],
        "title": "jira_create_issueArguments",
        "type": "object",
    },
    [
        {"project_key": "OPS", "summary": "Disk full", "issue_type": "Bug"},
        {
            "project_key": "OPS",
            "summary": "s",
            "issue_type": "Task",
            "assignee": None,
            "components": ["db"],
            "additional_fields": {"priority": {"name": "High"}, "labels": ["x"]},
        },
    ],
)

JIRA_SEARCH = Usable(
    "jira__jira_search",
    {
        "properties": {
            "jql": {"description": "JQL query string", "title": "Jql", "type": "string"},
            "fields": {"default": "summary,status", "title": "Fields", "type": "string"},
            "limit": {"default": 10, "maximum": 50, "minimum": 1, "title": "Limit", "type": "integer"},
            "start_at": {"default": 0, "minimum": 0, "title": "Start At", "type": "integer"},
        },
        "required": ["jql"],
        "title": "jira_searchArguments",
        "type": "object",
    },
    [{"jql": "project = OPS"}, {"jql": "x", "limit": 50, "start_at": 0}],
)

ATLASSIAN_GET_JIRA_ISSUE = Usable(
    "atlassian__getJiraIssue",
    {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "cloudId": {"type": "string", "description": "Unique identifier for an Atlassian Cloud instance"},
            "issueIdOrKey": {"type": "string", "description": "Issue id or key"},
            "fields": {"type": "array", "items": {"type": "string"}},
            "expand": {"type": "string"},
            "fieldsByKeys": {"type": "boolean"},
            "properties": {"type": "array", "items": {"type": "string"}},
            "updateHistory": {"type": "boolean"},
        },
        "required": ["cloudId", "issueIdOrKey"],
        "additionalProperties": False,
    },
    [{"cloudId": "c1", "issueIdOrKey": "OPS-1", "properties": ["p"], "fieldsByKeys": False}],
)

LINEAR_CREATE_ISSUE = Usable(
    "linear__create_issue",
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "The issue title"},
            "description": {"type": "string", "description": "The issue description as Markdown"},
            "team": {"type": "string", "description": "The team name or ID"},
            "priority": {
                "type": "number",
                "description": "0 = No priority, 1 = Urgent, 2 = High, 3 = Normal, 4 = Low",
                "enum": [0, 1, 2, 3, 4],
            },
            "labels": {"type": "array", "items": {"type": "string"}},
            "dueDate": {"type": "string", "description": "Due date in ISO format", "format": "date"},
            "parentId": {"type": ["string", "null"]},
            "estimate": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["title", "team"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [
        {"title": "Fix login", "team": "ENG"},
        {"title": "t", "team": "ENG", "priority": 2, "parentId": None, "dueDate": "2030-01-01", "estimate": 1.5},
    ],
)

LINEAR_LIST_ISSUES = Usable(
    "linear__list_issues",
    {
        "type": "object",
        "properties": {
            "limit": {"type": "number", "maximum": 250, "default": 50},
            "orderBy": {"type": "string", "enum": ["createdAt", "updatedAt"], "default": "updatedAt"},
            "includeArchived": {"type": "boolean", "default": True},
            "assignee": {"type": "string", "description": 'User ID, name, email, or "me"'},
            "state": {"type": "string"},
        },
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{}, {"limit": 10, "orderBy": "createdAt", "assignee": "me"}],
)

SENTRY_SEARCH_ISSUES = Usable(
    "sentry__search_issues",
    {
        "type": "object",
        "properties": {
            "organizationSlug": {"type": "string", "description": "The organization's slug"},
            "naturalLanguageQuery": {"type": "string", "minLength": 1},
            "projectSlugOrId": {"type": ["string", "null"], "default": None},
            "regionUrl": {"type": ["string", "null"], "format": "uri", "default": None},
            "limit": {"type": "number", "minimum": 1, "maximum": 100, "default": 10},
            "includeExplanation": {"type": "boolean", "default": False},
        },
        "required": ["organizationSlug", "naturalLanguageQuery"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{"organizationSlug": "acme", "naturalLanguageQuery": "unresolved errors", "regionUrl": None, "limit": 5}],
)

SENTRY_UPDATE_ISSUE = Usable(
    "sentry__update_issue",
    {
        "type": "object",
        "properties": {
            "organizationSlug": {"type": "string"},
            "issueId": {"type": "string"},
            "status": {
                "type": "string",
                "enum": ["resolved", "resolvedInNextRelease", "unresolved", "ignored"],
            },
            "assignedTo": {"type": "string", "description": "'user:123456' or 'team:789'"},
        },
        "required": ["organizationSlug", "issueId"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{"organizationSlug": "acme", "issueId": "PROJ-1", "status": "resolved"}],
)

POSTGRES_QUERY = Usable(
    "postgres__query",
    {"type": "object", "properties": {"sql": {"type": "string"}}},
    [{"sql": "select 1"}, {}],
)

POSTGRES_EXECUTE_SQL = Usable(
    "postgres__execute_sql",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "SQL with $1, $2 placeholders"},
            "params": {"type": "array", "description": "Values for the placeholders"},
        },
        "required": ["query"],
    },
    [{"query": "select $1, $2", "params": [1, "a", None, {"k": [True]}]}],
)

SLACK_POST_MESSAGE = Usable(
    "slack__slack_post_message",
    {
        "type": "object",
        "properties": {
            "channel_id": {"type": "string", "description": "The ID of the channel to post to"},
            "text": {"type": "string", "description": "The message text to post"},
        },
        "required": ["channel_id", "text"],
    },
    [{"channel_id": "C01", "text": "hello"}],
)

SLACK_CHANNEL_HISTORY = Usable(
    "slack__slack_get_channel_history",
    {
        "type": "object",
        "properties": {
            "channel_id": {"type": "string"},
            "limit": {"type": "number", "description": "Number of messages to retrieve", "default": 10},
        },
        "required": ["channel_id"],
    },
    [{"channel_id": "C01", "limit": 20}],
)

FETCH = Usable(
    "fetch__fetch",
    {
        "description": "Parameters for fetching a URL.",
        "properties": {
            "url": {"description": "URL to fetch", "format": "uri", "minLength": 1, "title": "Url", "type": "string"},
            "max_length": {
                "default": 5000,
                "description": "Maximum number of characters to return.",
                "exclusiveMaximum": 1000000,
                "exclusiveMinimum": 0,
                "title": "Max Length",
                "type": "integer",
            },
            "start_index": {"default": 0, "minimum": 0, "title": "Start Index", "type": "integer"},
            "raw": {"default": False, "title": "Raw", "type": "boolean"},
        },
        "required": ["url"],
        "title": "Fetch",
        "type": "object",
    },
    [{"url": "https://example.com"}, {"url": "https://example.com/a", "max_length": 999999, "raw": True}],
)

MEMORY_CREATE_ENTITIES = Usable(
    "memory__create_entities",
    {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The name of the entity"},
                        "entityType": {"type": "string", "description": "The type of the entity"},
                        "observations": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["name", "entityType", "observations"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["entities"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]}],
)

MEMORY_DELETE_RELATIONS = Usable(
    "memory__delete_relations",
    {
        "type": "object",
        "properties": {
            "relations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "from": {"type": "string"},
                        "to": {"type": "string"},
                        "relationType": {"type": "string"},
                    },
                    "required": ["from", "to", "relationType"],
                    "additionalProperties": False,
                },
            },
            "also": {"$ref": "#/properties/relations"},
        },
        "required": ["relations"],
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [{"relations": [{"from": "a", "to": "b", "relationType": "knows"}], "also": []}],
)

PYDANTIC_CREATE_ORDER = Usable(
    "shop__create_order",
    {
        "$defs": {
            "Address": {
                "description": "A postal address.",
                "properties": {
                    "street": {"title": "Street", "type": "string"},
                    "city": {"title": "City", "type": "string"},
                    "country": {"default": "NL", "pattern": "^[A-Z]{2}$", "title": "Country", "type": "string"},
                },
                "required": ["street", "city"],
                "title": "Address",
                "type": "object",
            },
            "Category": {
                "properties": {
                    "name": {"title": "Name", "type": "string"},
                    "children": {"items": {"$ref": "#/$defs/Category"}, "title": "Children", "type": "array"},
                },
                "required": ["name"],
                "title": "Category",
                "type": "object",
            },
            "Priority": {"enum": ["low", "normal", "high"], "title": "Priority", "type": "string"},
            "Line": {
                "properties": {
                    "sku": {"format": "uuid", "title": "Sku", "type": "string"},
                    "quantity": {"exclusiveMinimum": 0, "multipleOf": 1, "title": "Quantity", "type": "integer"},
                    "size": {"enum": [36, 38, 40], "title": "Size", "type": "integer"},
                    "gift": {"const": True, "title": "Gift", "type": "boolean"},
                },
                "required": ["sku", "quantity"],
                "title": "Line",
                "type": "object",
            },
        },
        "properties": {
            "lines": {"items": {"$ref": "#/$defs/Line"}, "minItems": 1, "title": "Lines", "type": "array"},
            "ship_to": {"$ref": "#/$defs/Address", "description": "Where the parcel goes"},
            "bill_to": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
            "priority": {"$ref": "#/$defs/Priority", "default": "normal"},
            "category": {"anyOf": [{"$ref": "#/$defs/Category"}, {"type": "null"}], "default": None},
            "deliver_after": {
                "anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}],
                "default": None,
                "title": "Deliver After",
            },
            "box": {
                "maxItems": 2,
                "minItems": 2,
                "prefixItems": [{"type": "integer"}, {"type": "integer"}],
                "title": "Box",
                "type": "array",
            },
            "tags": {"additionalProperties": {"type": "integer"}, "title": "Tags", "type": "object"},
            "notes": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "examples": ["ring twice"]},
        },
        "required": ["lines", "ship_to"],
        "title": "create_orderArguments",
        "type": "object",
        "x-fastmcp-wrap-result": True,
    },
    [
        {
            "lines": [{"sku": "0b2c9f52-4d7e-4f5e-9a51-8ea7f7b1e6a1", "quantity": 2}],
            "ship_to": {"street": "a", "city": "b"},
        },
        {
            "lines": [{"sku": "s", "quantity": 1, "size": 38, "gift": True}],
            "ship_to": {"street": "a", "city": "b", "country": "BE"},
            "bill_to": None,
            "priority": "high",
            "category": {"name": "shoes", "children": [{"name": "boots", "children": [{"name": "tall"}]}]},
            "deliver_after": "2030-01-01T10:00:00Z",
            "box": [30, 20],
            "tags": {"fragile": 1},
            "notes": None,
        },
    ],
)

ZOD_NOTION_SEARCH = Usable(
    "notion__search",
    {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "filter": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "property": {"type": "string", "const": "object"},
                            "value": {"type": "string", "enum": ["page", "database"]},
                        },
                        "required": ["property", "value"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ]
            },
            "sort": {
                "type": "object",
                "properties": {
                    "direction": {"type": "string", "enum": ["ascending", "descending"]},
                    "timestamp": {"type": "string", "const": "last_edited_time"},
                },
                "required": ["direction", "timestamp"],
                "additionalProperties": False,
            },
            "page_size": {"type": "number", "const": 100},
            "start_cursor": {"type": ["string", "number"]},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "mode": {"oneOf": [{"type": "string", "const": "fast"}, {"type": "string", "const": "thorough"}]},
            "meta": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"required": ["a"]}]},
        },
        "additionalProperties": False,
        "$schema": DRAFT_07,
    },
    [
        {"query": "roadmap"},
        {
            "filter": {"property": "object", "value": "page"},
            "sort": {"direction": "descending", "timestamp": "last_edited_time"},
            "page_size": 100,
            "start_cursor": 17,
            "headers": {"x": "y"},
            "mode": "thorough",
            "meta": {"a": "b"},
        },
        {"filter": None, "start_cursor": "abc"},
    ],
)

ZOD_ROOT_UNION = Usable(
    "calendar__find_event",
    {
        "$schema": DRAFT_07,
        "anyOf": [
            {
                "type": "object",
                "properties": {"event_id": {"type": "string"}},
                "required": ["event_id"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "day": {"type": "string", "format": "date"}},
                "required": ["title"],
                "additionalProperties": False,
            },
        ],
    },
    [{"event_id": "e1"}, {"title": "standup", "day": "2030-01-01"}],
)

USABLE: tuple[Usable, ...] = (
    GITHUB_CREATE_ISSUE,
    GITHUB_LIST_ISSUES,
    GITHUB_CREATE_REVIEW,
    FILESYSTEM_EDIT_FILE,
    FILESYSTEM_LIST_ALLOWED,
    FILESYSTEM_READ_MULTIPLE,
    JIRA_CREATE_ISSUE,
    JIRA_SEARCH,
    ATLASSIAN_GET_JIRA_ISSUE,
    LINEAR_CREATE_ISSUE,
    LINEAR_LIST_ISSUES,
    SENTRY_SEARCH_ISSUES,
    SENTRY_UPDATE_ISSUE,
    POSTGRES_QUERY,
    POSTGRES_EXECUTE_SQL,
    SLACK_POST_MESSAGE,
    SLACK_CHANNEL_HISTORY,
    FETCH,
    MEMORY_CREATE_ENTITIES,
    MEMORY_DELETE_RELATIONS,
    PYDANTIC_CREATE_ORDER,
    ZOD_NOTION_SEARCH,
    ZOD_ROOT_UNION,
)


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"inner": node}}
    return node


UNUSABLE: tuple[Unusable, ...] = (
    Unusable("search__query", {"type": "string", "description": "What to look for"}, "describes string, not an object"),
    Unusable(
        "azure__get_resource",
        {"type": "object", "properties": {"api-version": {"type": "string"}, "id": {"type": "string"}}},
        "its argument 'api-version' has a name Gemini refuses",
    ),
    Unusable(
        "files__open",
        {"anyOf": [{"type": "object", "properties": {"path": {"type": "string"}}}, {"type": "array"}]},
        "describes array, not an object",
    ),
    Unusable(
        "metrics__record",
        {"type": "object", "properties": {"value": {"allOf": [{"type": "string"}, {"type": "integer"}]}}},
        "cannot be met: value must be both string and integer",
    ),
    Unusable("graph__deep", _nested(30), "nests deeper than 20 levels"),
    Unusable(
        "legacy__post",
        {"type": "object", "properties": {"body": False}, "required": ["body"]},
        "body is required but allows no value",
    ),
)
