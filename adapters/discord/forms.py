"""An MCP server's question in Discord: its card, the answer modal a page at a time, and reading the answer.

The card (`question_embed`, `question_view`) names the requester, the server and the tool, quotes
the server's message, and offers *Answer…* (a form) or *Open link…* (a link), *Decline* and
*Cancel*: `QuestionButton`s whose `custom_id` is `cs:q-<action>:<question id>` and nothing else,
so they work after a restart (docs/decisions/0005-discord-adapter.md). *Open link…* accepts and shows the link
to the requester alone, in an ephemeral reply (`link_message`).

A Discord modal holds at most five components, so a form is cut into pages of five fields
(`form_pages`), and page `n` is `QuestionModal(form, question_id=..., page=n)`. The flow, for
the wiring (docs/decisions/0050-elicitation-forms-on-slack-and-discord.md):

1. *Answer…* by the requester: respond with `QuestionModal(form, page=1)` (only a click's
   response, not a modal's, may open a modal). A form without fields needs no modal: the click
   accepts it with empty content. Post the card with the requester's mention in the message
   content as well: a mention inside an embed notifies nobody.
2. Its submission (`parse_modal_id` on the modal's `custom_id`, read from the raw interaction
   data in `on_interaction` as the Edit modal's is, so a restart does not lose it): `raw_answers`
   gives the page's raw values by field name; merge them into the values of earlier pages (held
   by the adapter for that question and person). `page_problem` says whether the page itself is
   wrong (reply ephemerally with the problem and a `continue_view` button for the same page, as a
   modal cannot answer a modal).
3. More pages: reply ephemerally with `QUESTION_CONTINUE` and `continue_view(question_id, n + 1,
   pages)`; its `ContinueButton` opens `QuestionModal(form, page=n + 1)`, prefilled with what
   was entered before when the person comes back to a page.
4. The last page: `read_answer(form, merged)` gives the content, or an `AnswerError` whose field's
   page (`page_of`) is reopened with the same button, its problem in the reply.

Fields: text, numbers, dates and emails are text inputs (a placeholder says the format or the
range); yes / no and choices of at most 25 options are selects (Discord's string select in a
`Label`); a choice of more is a text input where the option's label or value is typed (commas
between several). Options travel as their position (`adapters.form_values`). Limits from
Discord's docs: modal title 45 characters, label 45, label description 100, placeholder 100
(150 for a select), text input value 4,000, 25 options of 100 characters, `custom_id` 100.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol

import discord

from adapters import form_values as fv
from adapters.discord import messages as msg
from adapters.discord.markup import MESSAGE_CHARS
from adapters.words.display import reveal_invisible
from adapters.words.questions import QUESTION_ASKS, QUESTION_LINK
from bot.tools.mcp.elicitation.forms import (
    Action,
    AnswerError,
    FieldKind,
    Form,
    FormField,
    LinkRequest,
    Option,
    Question,
    option_text,
    read_answer,
)

PAGE_FIELDS = 5
"""Fields on one page of the modal: Discord allows five top-level components in a modal."""
TITLE_CHARS = 45
LABEL_CHARS = 45
LABEL_DESCRIPTION_CHARS = 100
PLACEHOLDER_CHARS = 100
SELECT_PLACEHOLDER_CHARS = 150
TEXT_INPUT_CHARS = 4000
TEXT_DISPLAY_CHARS = 4000
SELECT_OPTIONS = 25
OPTION_CHARS = 100
URL_BUTTON_CHARS = 512
DESCRIPTION_CHARS = 4096
EMBED_FIELD_CHARS = 1024
SHORT_FROM = 150
"""A text field whose `maxLength` is at most this gets a one-line box; otherwise a paragraph."""
_MESSAGE_ROOM = 3000
_QUESTION_ID = r"(?P<question_id>[0-9A-Za-z_-]{1,64})"
BUTTON_TEMPLATE = rf"cs:q-(?P<action>answer|link|decline|cancel):{_QUESTION_ID}"
"""A card button's `custom_id` (at most 76 characters)."""
CONTINUE_TEMPLATE = rf"cs:q-page:{_QUESTION_ID}:(?P<page>[1-4])"
"""The Continue button's `custom_id`: the page it opens (a form has at most 20 fields, 4 pages)."""
_MODAL_ID = re.compile(rf"cs:q-modal:{_QUESTION_ID}:(?P<page>[1-4])")
_FIELD_ID = re.compile(r"f(?P<index>[0-9]{1,2})")
_COLOUR = discord.Colour.blurple()
_COLOURS = {
    "accept": discord.Colour.green(),
    "decline": discord.Colour.red(),
    "cancel": discord.Colour.dark_grey(),
    "expired": discord.Colour.dark_grey(),
}

Outcome = Action | Literal["expired"]
"""How a question ended: the person's action, or "expired" (nobody answered in time)."""
ButtonAction = Literal["answer", "link", "decline", "cancel"]
_LABELS = {
    "answer": msg.BUTTON_ANSWER,
    "link": msg.BUTTON_OPEN_LINK,
    "decline": msg.BUTTON_DECLINE,
    "cancel": msg.BUTTON_CANCEL_QUESTION,
}
_STYLES = {
    "answer": discord.ButtonStyle.primary,
    "link": discord.ButtonStyle.primary,
    "decline": discord.ButtonStyle.danger,
    "cancel": discord.ButtonStyle.secondary,
}


class QuestionClicks(Protocol):
    """What the client's interaction handler does with a question's buttons (implemented by the wiring)."""

    async def on_question_button(
        self, interaction: discord.Interaction[Any], action: ButtonAction, question_id: str
    ) -> None:
        """*Answer…*, *Open link…*, *Decline* or *Cancel* on a question's card."""

    async def on_question_page(self, interaction: discord.Interaction[Any], question_id: str, page: int) -> None:
        """*Continue (n/m)*: open page `page` (1-based) of the question's modal."""


def form_pages(form: Form) -> list[tuple[FormField, ...]]:
    """The form's fields in pages of at most `PAGE_FIELDS`, in order; one empty page for a form without fields."""
    fields = form.fields
    return [fields[start : start + PAGE_FIELDS] for start in range(0, len(fields), PAGE_FIELDS)] or [()]


def page_of(form: Form, name: str | None) -> int:
    """The page (1-based) that holds field `name`; 1 for a name the form does not have."""
    for number, page in enumerate(form_pages(form), start=1):
        if any(spec.name == name for spec in page):
            return number
    return 1


class QuestionModal(discord.ui.Modal):
    """One page of a question's form as a Discord modal.

    Its `custom_id` is `cs:q-modal:<question id>:<page>`; each field's input has the `custom_id`
    `f<position in the form>`. The submission is read from the raw interaction data
    (`parse_modal_id`, `raw_answers`), not by `on_submit`: discord.py keeps sent modals in
    memory only, and a restart would drop the submission of one opened before it.

    Args:
        form: the question.
        question_id: the question's id (at most 64 letters, digits, `-` and `_`).
        page: which page (1-based, within `form_pages(form)`).
        title: the modal's title (the server's name, say); cut to fit 45 characters with the page.
        entered: raw values entered before, by field name (`raw_answers`), shown as defaults
            when the person comes back to a page.

    Raises:
        ValueError: `page` is not a page of the form, or the question id does not fit.
    """

    def __init__(
        self,
        form: Form,
        *,
        question_id: str,
        page: int = 1,
        title: str,
        entered: Mapping[str, object] | None = None,
    ) -> None:
        pages = form_pages(form)
        if not 1 <= page <= len(pages):
            raise ValueError(f"page {page} is not one of the form's {len(pages)}")
        custom_id = f"cs:q-modal:{question_id}:{page}"
        if _MODAL_ID.fullmatch(custom_id) is None:
            raise ValueError("a question id is 1 to 64 letters, digits, '-' or '_'")
        name = " ".join(title.split()) or "Question"
        if len(pages) > 1:
            suffix = msg.QUESTION_MODAL_PAGE.format(title="", page=page, pages=len(pages))
            name = msg.QUESTION_MODAL_PAGE.format(
                title=fv.clip(name, TITLE_CHARS - len(suffix)), page=page, pages=len(pages)
            )
        super().__init__(title=fv.clip(name, TITLE_CHARS), custom_id=custom_id, timeout=None)
        self.question_id = question_id
        self.page = page
        fields = pages[page - 1]
        if len(fields) < PAGE_FIELDS and page == 1:
            # Room to spare: the server's message above the fields (the card quotes it too).
            text = fv.clip(_escaped(reveal_invisible(form.message)), TEXT_DISPLAY_CHARS)
            self.add_item(discord.ui.TextDisplay(text))
        index = {spec.name: i for i, spec in enumerate(form.fields)}
        for spec in fields:
            self.add_item(_labelled(spec, index[spec.name], (entered or {}).get(spec.name)))

    async def on_submit(self, interaction: discord.Interaction[Any], /) -> None:
        """Nothing: the submission is handled in `on_interaction` (see the class docstring)."""
        return None


def _labelled(spec: FormField, index: int, entered: object) -> discord.ui.Label[Any]:
    """One field as a `Label` around its input."""
    component: discord.ui.Item[Any]
    custom_id = f"f{index}"
    if spec.kind is FieldKind.BOOLEAN:
        given = entered if isinstance(entered, bool) else spec.default
        chosen = (fv.BOOLEAN_IDS[0] if given else fv.BOOLEAN_IDS[1]) if isinstance(given, bool) else None
        options = [
            discord.SelectOption(label=msg.QUESTION_YES, value=fv.BOOLEAN_IDS[0], default=chosen == fv.BOOLEAN_IDS[0]),
            discord.SelectOption(label=msg.QUESTION_NO, value=fv.BOOLEAN_IDS[1], default=chosen == fv.BOOLEAN_IDS[1]),
        ]
        component = _select(custom_id, options, required=spec.required, most=1, placeholder=msg.QUESTION_CHOOSE)
    elif spec.kind in (FieldKind.CHOICE, FieldKind.CHOICES) and len(spec.options) <= SELECT_OPTIONS:
        chosen_ids = _entered_ids(spec, entered) if entered is not None else fv.default_ids(spec)
        options = [
            discord.SelectOption(
                label=fv.clip(option.label, OPTION_CHARS) or fv.option_id(i),
                value=fv.option_id(i),
                default=fv.option_id(i) in chosen_ids,
            )
            for i, option in enumerate(spec.options)
        ]
        many = spec.kind is FieldKind.CHOICES
        most = min(spec.max_items or len(options), len(options)) if many else 1
        least = min(max(spec.min_items or 1, 1), most) if many else 1
        placeholder = msg.QUESTION_CHOOSE_SOME if many else msg.QUESTION_CHOOSE
        component = _select(
            custom_id, options, required=spec.required, most=max(most, 1), least=least, placeholder=placeholder
        )
    else:
        component = _text_input(spec, custom_id, entered)
    description = fv.clip(spec.description, LABEL_DESCRIPTION_CHARS) if spec.description else None
    return discord.ui.Label(
        text=fv.clip(spec.label, LABEL_CHARS) or spec.name[:LABEL_CHARS], description=description, component=component
    )


def _select(
    custom_id: str,
    options: list[discord.SelectOption],
    *,
    required: bool,
    most: int,
    placeholder: str,
    least: int = 1,
) -> discord.ui.Select[Any]:
    return discord.ui.Select(
        custom_id=custom_id,
        options=options,
        required=required,
        # An optional select may be left empty: Discord counts `min_values` only when required.
        min_values=least if required else 0,
        max_values=most,
        placeholder=fv.clip(placeholder, SELECT_PLACEHOLDER_CHARS),
    )


def _text_input(spec: FormField, custom_id: str, entered: object) -> discord.ui.TextInput[Any]:
    """A text box for text, numbers, dates, and choices with more options than a select holds."""
    longest = min(spec.max_length, TEXT_INPUT_CHARS) if spec.kind is FieldKind.TEXT and spec.max_length else None
    shortest = min(spec.min_length, TEXT_INPUT_CHARS) if spec.kind is FieldKind.TEXT and spec.min_length else None
    if longest is not None and shortest is not None and shortest > longest:
        shortest = None  # unanswerable as asked; the schema's check says why
    short = (
        spec.kind is not FieldKind.TEXT or spec.format is not None or (longest is not None and longest <= SHORT_FROM)
    )
    if isinstance(entered, str | int | float) and not isinstance(entered, bool):
        default: str | None = str(entered)[: longest or TEXT_INPUT_CHARS]
    elif isinstance(entered, list):
        shown = (value.label if isinstance(value, Option) else str(value) for value in entered)
        default = ", ".join(shown)[:TEXT_INPUT_CHARS]
    else:
        default = _default_text(spec, longest or TEXT_INPUT_CHARS)
    return discord.ui.TextInput(
        custom_id=custom_id,
        style=discord.TextStyle.short if short else discord.TextStyle.paragraph,
        required=spec.required,
        min_length=shortest,
        max_length=longest or TEXT_INPUT_CHARS,
        default=default,
        placeholder=fv.clip(_placeholder(spec), PLACEHOLDER_CHARS) or None,
    )


def _default_text(spec: FormField, limit: int) -> str | None:
    if spec.kind is FieldKind.TEXT:
        return fv.default_text(spec, limit)
    if spec.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        return fv.default_number(spec)
    if spec.kind in (FieldKind.CHOICE, FieldKind.CHOICES):
        # Labels (or values, where a label names another option first), else the values when
        # the labels do not fit; left out when neither fits, rather than cut into text that
        # names no option.
        chosen = [spec.options[int(i)] for i in fv.default_ids(spec)]
        for text in (", ".join(option_text(spec, o) for o in chosen), ", ".join(o.value for o in chosen)):
            if 0 < len(text) <= limit:
                return text
    return None


def _placeholder(spec: FormField) -> str:
    """What a text box shows while empty: the format, the range, or the options to type."""
    if spec.kind is FieldKind.TEXT:
        return msg.QUESTION_PLACEHOLDER.get(spec.format or "", "")
    if spec.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        low, high = fv.number_bounds(spec)
        words = msg.QUESTION_NUMBER[spec.kind.value]
        words += msg.QUESTION_NUMBER_FROM.format(low=low) if low is not None else ""
        return words + (msg.QUESTION_NUMBER_TO.format(high=high) if high is not None else "")
    labels = ", ".join(option.label for option in spec.options)
    words = msg.QUESTION_TYPE_OPTIONS if spec.kind is FieldKind.CHOICES else msg.QUESTION_TYPE_OPTION
    return words.format(options=labels)


def _entered_ids(spec: FormField, entered: object) -> tuple[str, ...]:
    """The option ids of raw values entered before (`Option`s as `raw_answers` gives them, or option values).

    At most one for a CHOICE (a select of one pick cannot show two), at most `max_items` for a CHOICES.
    """
    values = entered if isinstance(entered, list) else [entered]
    ids = tuple(fv.option_id(i) for i, option in enumerate(spec.options) if option in values or option.value in values)
    most = 1 if spec.kind is FieldKind.CHOICE else spec.max_items
    return ids[:most] if most is not None and most >= 1 else ids


def parse_modal_id(custom_id: str) -> tuple[str, int] | None:
    """`(question id, page)` of a `QuestionModal`'s `custom_id`, else None."""
    match = _MODAL_ID.fullmatch(custom_id)
    return (match["question_id"], int(match["page"])) if match else None


def raw_answers(form: Form, data: Mapping[str, Any]) -> dict[str, object]:
    """The raw values of one submitted page, by field name, for `read_answer` (after merging the pages).

    Args:
        form: the question.
        data: the MODAL_SUBMIT interaction's `data` (`components`: labels, or action rows, around
            text inputs and selects).

    Returns:
        For each field this submission holds: the text typed, a bool for yes / no, the `Option`
        picked for a choice, a list of them for a multi-choice; None for a select left empty.
        Fields of other pages are absent.
    """
    raw: dict[str, object] = {}
    for component in _walk(data.get("components")):
        match = _FIELD_ID.fullmatch(str(component.get("custom_id", "")))
        if match is None or int(match["index"]) >= len(form.fields):
            continue
        spec = form.fields[int(match["index"])]
        if "values" in component:
            values = component.get("values")
            picked = [str(value) for value in values] if isinstance(values, list) else []
            if spec.kind is FieldKind.BOOLEAN:
                raw[spec.name] = fv.boolean_value(picked[0]) if picked else None
            elif spec.kind is FieldKind.CHOICES:
                raw[spec.name] = [fv.option_value(spec, value) for value in picked]
            else:
                raw[spec.name] = fv.option_value(spec, picked[0]) if picked else None
        elif "value" in component:
            value = component.get("value")
            raw[spec.name] = value if isinstance(value, str) else None
    return raw


def page_problem(form: Form, entered: Mapping[str, object], page: int) -> AnswerError | None:
    """The first problem with the fields of pages 1 to `page` in what was entered so far, else None.

    Those fields are read and checked as `read_answer` would, against the server's schema cut
    to them (their properties, and which of them are required; not rules about the whole form,
    such as `minProperties`, which a part cannot meet); later pages are not filled in yet, and
    `read_answer` over the whole form checks everything once the last page is in.
    """
    fields = tuple(spec for part in form_pages(form)[:page] for spec in part)
    names = {spec.name for spec in fields}
    properties = form.schema.get("properties") or {}
    schema = {
        "type": "object",
        "properties": {name: spec for name, spec in properties.items() if name in names},
        "required": [name for name in form.schema.get("required") or [] if name in names],
    }
    try:
        read_answer(Form(message=form.message, fields=fields, schema=schema), entered)
    except AnswerError as error:
        return error
    return None


def _walk(components: Any) -> Iterator[Mapping[str, Any]]:
    for component in components or []:
        if not isinstance(component, Mapping):
            continue
        yield component
        yield from _walk(component.get("components"))
        inner = component.get("component")
        if isinstance(inner, Mapping):
            yield from _walk([inner])


class QuestionButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=BUTTON_TEMPLATE):
    """*Answer…*, *Open link…*, *Decline* or *Cancel* on a question's card.

    Args:
        action: `answer`, `link`, `decline` or `cancel`.
        question_id: the question (the only state on the button).
    """

    def __init__(self, action: ButtonAction, question_id: str) -> None:
        super().__init__(
            discord.ui.Button(label=_LABELS[action], style=_STYLES[action], custom_id=f"cs:q-{action}:{question_id}")
        )
        self.action: ButtonAction = action
        self.question_id = question_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> QuestionButton:
        """Rebuild the button from a clicked `custom_id`."""
        action: ButtonAction = match["action"]  # type: ignore[assignment]
        return cls(action, match["question_id"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: QuestionClicks = interaction.client.interactions
        await handler.on_question_button(interaction, self.action, self.question_id)


class ContinueButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=CONTINUE_TEMPLATE):
    """*Continue (n/m)* under a submitted page: opens page `page` of the question's modal.

    Args:
        question_id: the question.
        page: the page it opens (1-based).
        pages: how many pages the form has (for the label only).
        label: the button's label instead of *Continue (page/pages)* (*Fix the answer…*, say).
    """

    def __init__(self, question_id: str, page: int, pages: int | None = None, *, label: str | None = None) -> None:
        if label is None:
            label = msg.BUTTON_CONTINUE.format(page=page, pages=pages) if pages else msg.BUTTON_CONTINUE.split(" (")[0]
        super().__init__(
            discord.ui.Button(
                label=label, style=discord.ButtonStyle.primary, custom_id=f"cs:q-page:{question_id}:{page}"
            )
        )
        self.question_id = question_id
        self.page = page

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ContinueButton:
        """Rebuild the button from a clicked `custom_id`."""
        return cls(match["question_id"], int(match["page"]))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's interaction handler."""
        handler: QuestionClicks = interaction.client.interactions
        await handler.on_question_page(interaction, self.question_id, self.page)


def question_view(question: Question, question_id: str) -> discord.ui.View:
    """The open card's buttons: *Answer…* or *Open link…*, *Decline*, *Cancel*.

    Stopped after sending: the registry (`Client.add_dynamic_items(QuestionButton, ContinueButton)`
    in `setup_hook`) dispatches clicks.
    """
    view = discord.ui.View(timeout=None)
    view.add_item(QuestionButton("link" if isinstance(question, LinkRequest) else "answer", question_id))
    view.add_item(QuestionButton("decline", question_id))
    view.add_item(QuestionButton("cancel", question_id))
    return view


def continue_view(question_id: str, page: int, pages: int, *, label: str | None = None) -> discord.ui.View:
    """*Continue (page/pages)*, for the ephemeral reply to a submitted page (see the module docstring).

    `label` replaces the button's label (the reply to a refused answer reopens a page it names).
    """
    view = discord.ui.View(timeout=None)
    view.add_item(ContinueButton(question_id, page, pages, label=label))
    return view


def question_embed(question: Question, *, requester_id: str, server: str, tool: str) -> discord.Embed:
    """The card of an open question: who is asked, by which server and tool, the message, and what it asks for.

    Args:
        question: the form or link.
        requester_id: the Discord user id of the person asked (mentioned).
        server: the MCP server's name.
        tool: the tool whose call asks.
    """
    embed = _head(msg.QUESTION_TITLE, _COLOUR, question, requester_id=requester_id, server=server, tool=tool)
    if isinstance(question, LinkRequest):
        embed.description = f"{embed.description}\n\n{msg.QUESTION_LINK_NOTE}"
    elif question.fields:
        embed.add_field(name=msg.FIELD_QUESTION_FIELDS, value=_field_list(question), inline=False)
    embed.set_footer(text=msg.QUESTION_ONLY_REQUESTER)
    return embed


def finished_question_embed(
    question: Question,
    *,
    requester_id: str,
    server: str,
    tool: str,
    outcome: Outcome,
    by_id: str | None,
    at: datetime,
) -> discord.Embed:
    """The card once the question ended (send it with an empty view: no buttons).

    Args:
        question: the form or link.
        requester_id: the Discord user id of the person who was asked.
        server: the MCP server's name.
        tool: the tool whose call asked.
        outcome: the person's action, or "expired".
        by_id: who answered, declined or cancelled; None when nobody did (expired, or the bot).
        at: when it ended (aware).
    """
    key = outcome.value if isinstance(outcome, Action) else outcome
    embed = _head(
        msg.QUESTION_TITLE_DONE[key], _COLOURS[key], question, requester_id=requester_id, server=server, tool=tool
    )
    words = msg.QUESTION_DONE[key] if by_id is not None else msg.QUESTION_DONE_NOBODY[key]
    embed.add_field(name=msg.FIELD_QUESTION_OUTCOME, value=words.format(user=by_id, ts=int(at.timestamp())))
    return embed


def link_message(link: LinkRequest, *, server: str) -> tuple[str, discord.ui.View]:
    """The requester's ephemeral reply with the link: its text, and a link button when the URL fits one (512).

    Returns:
        The message content (within 2,000 characters) and a view (empty for a link too long for
        a button; the content then holds the link as far as it fits).
    """
    content = fv.clip(QUESTION_LINK.format(server=_code(server), link=link.url), MESSAGE_CHARS)
    view = discord.ui.View(timeout=None)
    if len(link.url) <= URL_BUTTON_CHARS:
        view.add_item(discord.ui.Button(label=msg.BUTTON_LINK, style=discord.ButtonStyle.link, url=link.url))
    return content, view


def _head(
    title: str, colour: discord.Colour, question: Question, *, requester_id: str, server: str, tool: str
) -> discord.Embed:
    asks = QUESTION_ASKS.format(user=requester_id, server=_code(server), tool=_code(tool))
    message = fv.clip(_escaped(reveal_invisible(question.message)), _MESSAGE_ROOM)
    return discord.Embed(title=title, colour=colour, description=f"{asks}\n> {message}")


def _field_list(form: Form) -> str:
    """The form's fields, a line each, within an embed field's 1,024 characters."""
    lines: list[str] = []
    used = 0
    pages = form_pages(form)
    tail = msg.QUESTION_PAGES.format(pages=len(pages)) if len(pages) > 1 else ""
    for shown, spec in enumerate(form.fields):
        line = msg.QUESTION_FIELD_LINE.format(
            label=fv.clip(_escaped(spec.label), 100),
            required=msg.QUESTION_FIELD_REQUIRED if spec.required else "",
        )
        if used + len(line) + 1 > EMBED_FIELD_CHARS - len(tail) - 40:
            lines.append(msg.QUESTION_FIELD_MORE.format(count=len(form.fields) - shown))
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join([*lines, *([tail] if tail else [])])


_BRACKET = re.compile(r"(?<!\\)((?:\\\\)*)([\[\]<])")
"""A `[`, `]` or `<` after an even number of backslashes (none included): not yet escaped."""


def _escaped(text: str) -> str:
    """A server's text with Discord's Markdown escaped, every bracket and `<` included.

    `discord.utils.escape_markdown` escapes only the first `[` of a line's masked links, so a
    second `[https://good.example](https://evil.example)` would still show as a link to
    somewhere else than it says; escaping each bracket shows them all as typed. An escaped `<`
    shows `<@123>` or `<@&456>` as typed rather than as a mention of someone (which, in an
    embed, notifies nobody but reads as if the card named them).
    """
    return _BRACKET.sub(r"\1\\\2", discord.utils.escape_markdown(text))


def _code(name: str) -> str:
    """A server's or tool's name in backticks, with any backtick in it removed (names rarely have one)."""
    return fv.clip(name.replace("`", ""), 100)
