"""How the calls of an MCP tool will be decided once an admin accepts its held definition.

The admins' message about held tools and the reply to `/countersign mcp accept` say it per tool,
for the admins' workspace, with the rule the decider will use (`bot.policy.review.hinted_rule`,
the resolution `rule_here` applies to every call): an accept never changes a policy, but a new
tool its server marks read-only may run without a card where an admin let that server's hint
count (`read-only-hint <server> auto`), and an admin accepting it should know that first.
Workspace-wide rules are read; a channel's own rule may decide otherwise there, which is said.
"""

from __future__ import annotations

from bot.base.mode import Mode
from bot.policy.config import ALL, WorkspaceConfig
from bot.policy.outlook import Decided, ToolOutlook
from bot.policy.review import hinted_rule
from bot.tools.mcp.config import registry_name
from bot.tools.mcp.pins import ToolDefinition
from bot.tools.server_wide import server_patterns


def outlook(config: WorkspaceConfig, definition: ToolDefinition) -> ToolOutlook:
    """How calls of `definition`'s tool will be decided in `config`'s workspace, once it is offered.

    Args:
        config: the workspace's configuration (workspace-wide rules decide; see the module).
        definition: the held definition to be accepted (its hints as the server lists them).
    """
    tool = registry_name(definition.server, definition.name)
    rule = hinted_rule(
        config,
        tool,
        ALL,
        read_only=_hint(definition, "readOnlyHint"),
        destructive=_hint(definition, "destructiveHint"),
    )
    names = {tool, *server_patterns(tool)}
    differ = any(channel != ALL and name in names for channel, name in config.rules)
    if rule is None:
        return ToolOutlook(tool=tool, decided=Decided.CARD, channels_differ=differ)
    if rule.mode is Mode.DENY:
        decided = Decided.DENIED
    elif rule.mode is Mode.AUTO:
        decided = Decided.NO_CARD
    else:
        decided = Decided.CARD_WHEN if rule.condition else Decided.CARD
    return ToolOutlook(
        tool=tool,
        decided=decided,
        rule=None if rule.from_hint else rule.tool_name,
        condition=rule.condition if decided is Decided.CARD_WHEN else None,
        by_hint=rule.from_hint,
        channels_differ=differ,
    )


def _hint(definition: ToolDefinition, key: str) -> bool | None:
    value = definition.annotations.get(key)
    return value if isinstance(value, bool) else None
