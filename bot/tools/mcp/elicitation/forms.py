"""An MCP server's question (elicitation) as a form a person can fill in, and their answer checked.

MCP elicitation (the 2026-07-28 specification, "Elicitation") asks the user either to fill in a
form or to visit a URL. A form's `requestedSchema` is a restricted JSON Schema: an object whose
properties are flat primitives (string with `minLength`/`maxLength`/`format`, number or integer
with `minimum`/`maximum`, boolean, a single-select enum spelled `enum`, `enum` + `enumNames` or
`oneOf` of `const`/`title`, and a multi-select `array` of such an enum with `minItems`/`maxItems`).
`question_of` turns one request into a `Form` (or a `LinkRequest`) that the terminal, a Slack
modal or a Discord modal can render field by field; anything outside that subset is refused
with the reason (`UnusableQuestionError`), never guessed at.

An answer comes back as what an input gives (text from a text box, a bool from a checkbox, a
list from a multi-select); `read_answer` turns it into the schema's types and validates it with
`jsonschema` against the server's own schema (formats included), so a server never receives
what it asked not to. The three actions are MCP's: accept (with content in form mode), decline
(an explicit no) and cancel (dismissed without a choice).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import mcp_types
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match

from bot.base.errors import CountersignError

MAX_FIELDS = 20
"""The most fields a form may ask for; a longer one is refused (no chat form shows more usefully)."""
MAX_OPTIONS = 100
"""The most options a choice may offer (a Slack static select shows at most 100)."""
UNNAMED = "Unnamed field"
"""The label of a field whose schema gives it neither a title nor a name with anything to read."""
LABEL_IN_ERROR_CHARS = 100
"""The most characters of a label (or an option's) quoted in an `AnswerError`: a server's labels may be huge."""
_REFUSED_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "pattern", "patternProperties"})
"""Keywords outside MCP's subset that validating would act on dangerously: a reference would be looked
up (and fail), a regular expression could take minutes on a crafted answer."""
_DATA_KEYWORDS = frozenset({"default", "const", "enum", "examples", "enumNames"})
"""Keywords whose values are data, not schemas (`_refused_keyword` does not look inside them)."""
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose values map names (any text, "pattern" included) to schemas."""
_TRUE = frozenset({"true", "yes", "y", "1", "on"})
_FALSE = frozenset({"false", "no", "n", "0", "off"})


class Action(StrEnum):
    """What the person did with a question (MCP's `ElicitResult.action`)."""

    ACCEPT = "accept"
    """They answered (form mode: with content; URL mode: they agreed to open the link)."""
    DECLINE = "decline"
    """They said no."""
    CANCEL = "cancel"
    """They dismissed it without a choice (also what an expiry or a stop answers)."""


class FieldKind(StrEnum):
    """How a form field is filled in."""

    TEXT = "text"
    NUMBER = "number"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    CHOICE = "choice"
    """One of `options`."""
    CHOICES = "choices"
    """Any number of `options` (within `min_items`/`max_items`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """One option of a choice: the value the server receives, and the label a person reads."""

    value: str
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FormField:
    """One field of a form, read from one property of the requested schema.

    Attributes:
        name: the property's name (the key in the answer's content).
        label: what a person reads: the property's `title`, else its name.
        description: its `description`, or "".
        kind: how it is filled in.
        required: whether the schema lists it in `required`.
        default: its `default` (a tuple of values for CHOICES), or None.
        options: the options of a CHOICE or CHOICES field, else ().
        min_length: for TEXT, `minLength`.
        max_length: for TEXT, `maxLength`.
        format: for TEXT, `format`: "email", "uri", "date" or "date-time", else None.
        minimum: for NUMBER and INTEGER, `minimum`.
        maximum: for NUMBER and INTEGER, `maximum`.
        min_items: for CHOICES, `minItems`.
        max_items: for CHOICES, `maxItems`.
    """

    name: str
    label: str
    description: str = ""
    kind: FieldKind
    required: bool = False
    default: str | int | float | bool | tuple[str, ...] | None = None
    options: tuple[Option, ...] = ()
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_items: int | None = None
    max_items: int | None = None

    def option_label(self, value: str) -> str:
        """The label of the option whose value is `value` (the value itself when none is)."""
        return next((option.label for option in self.options if option.value == value), value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Form:
    """A server's form-mode question.

    Attributes:
        message: the server's words to the person (what it asks and why).
        fields: the fields, in the schema's property order.
        schema: the requested schema as the server sent it; answers are validated against it.
    """

    message: str
    fields: tuple[FormField, ...]
    schema: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRequest:
    """A server's URL-mode question: the person is asked to open `url` (an http or https link).

    Only the requester may see the link (it may carry a one-time token); accepting means they
    agreed to open it, and carries no content.
    """

    message: str
    url: str


Question = Form | LinkRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A person's answer to a question.

    Attributes:
        action: accept, decline or cancel.
        content: for an accepted form, the values by field name (in the schema's types); else None.
    """

    action: Action
    content: Mapping[str, Any] | None = None

    def as_result(self) -> mcp_types.ElicitResult:
        """The answer as MCP's `ElicitResult`, to send back to the server."""
        content = dict(self.content) if self.action is Action.ACCEPT and self.content is not None else None
        return mcp_types.ElicitResult(action=self.action.value, content=content)


class UnusableQuestionError(CountersignError):
    """A server's question cannot be shown as a form (outside MCP's restricted schema, or a bad link).

    Args:
        reason: why, in one clause a person or the model can read.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AnswerError(CountersignError):
    """An answer does not fit the question; nothing was sent, and the person may answer again.

    Args:
        message: what is wrong, in words for the person who answered ("Amount must be at most 100.").
        field: the field's name, when one field is wrong.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def question_of(request: mcp_types.ElicitRequest) -> Question:
    """The form or link a server's `elicitation/create` request asks the person to answer.

    Args:
        request: one elicitation request (from an `InputRequiredResult`'s `input_requests`, or
            sent by a handshake-era server during a call).

    Raises:
        UnusableQuestionError: the requested schema is outside MCP's restricted subset (a nested
            object, an unknown type, more than `MAX_FIELDS` fields, a choice with more than
            `MAX_OPTIONS` options, a reference or a regular expression to check answers with), or a
            URL request's link is not an http or https URL (spaces, control and invisible
            characters included), or names a user or password before its host.
    """
    params = request.params
    message = " ".join(params.message.split()) or "The server asks for input."
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        try:
            parts = urlsplit(params.url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or _unsafe_in_url(params.url):
            # Never the URL itself: the reason reaches the model, and a link may carry a one-time token.
            raise UnusableQuestionError("its link is not an http or https URL that can be shown")
        if "@" in parts.netloc:
            # MCP forbids credentials in the link, and "https://good.example@evil.example" leads
            # somewhere else than it reads.
            raise UnusableQuestionError(f"its link has a user name before its host {parts.hostname[:200]!r}")
        return LinkRequest(message=message, url=params.url)
    return form_of(message, params.requested_schema)


def form_of(message: str, schema: Mapping[str, Any]) -> Form:
    """The `Form` of a requested schema (see `question_of`).

    Raises:
        UnusableQuestionError: as `question_of` says.
    """
    if schema.get("type") != "object":
        raise UnusableQuestionError("its requested schema is not an object")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        raise UnusableQuestionError("its requested schema has no properties")
    if len(properties) > MAX_FIELDS:
        raise UnusableQuestionError(f"it asks for {len(properties)} fields, over {MAX_FIELDS}")
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise UnusableQuestionError("its requested schema's `required` is not a list of names")
    try:
        Draft202012Validator.check_schema(dict(schema))
    except Exception as exc:
        raise UnusableQuestionError(f"its requested schema is not valid JSON Schema ({_first_line(exc)})") from None
    refused = _refused_keyword(schema)
    if refused is not None:
        raise UnusableQuestionError(f"its requested schema uses {refused!r}, which MCP's form schemas do not have")
    fields = tuple(_field(str(name), spec, str(name) in required) for name, spec in properties.items())
    return Form(message=message, fields=fields, schema=dict(schema))


def _field(name: str, spec: object, required: bool) -> FormField:
    """One property as a field (`form_of`)."""
    if not isinstance(spec, Mapping):
        raise UnusableQuestionError(f"its field {name!r} is not a schema")
    common: dict[str, Any] = {
        "name": name,
        "label": _text(spec.get("title")) or _text(name) or UNNAMED,
        "description": _text(spec.get("description")),
        "required": required,
    }
    kind = spec.get("type")
    default = spec.get("default")
    if kind == "string" and ("enum" in spec or "oneOf" in spec):
        options = _options(name, spec)
        return FormField(kind=FieldKind.CHOICE, options=options, default=_in(default, options), **common)
    if kind == "string":
        fmt = spec.get("format")
        if fmt is not None and fmt not in ("email", "uri", "date", "date-time"):
            raise UnusableQuestionError(f"its field {name!r} has the format {fmt!r}, not one MCP allows")
        return FormField(
            kind=FieldKind.TEXT,
            min_length=_int_or_none(spec.get("minLength")),
            max_length=_int_or_none(spec.get("maxLength")),
            format=fmt,
            default=default if isinstance(default, str) else None,
            **common,
        )
    if kind in ("number", "integer"):
        return FormField(
            kind=FieldKind.INTEGER if kind == "integer" else FieldKind.NUMBER,
            minimum=_number_or_none(spec.get("minimum")),
            maximum=_number_or_none(spec.get("maximum")),
            default=default if _is_number(default) else None,
            **common,
        )
    if kind == "boolean":
        return FormField(kind=FieldKind.BOOLEAN, default=default if isinstance(default, bool) else None, **common)
    if kind == "array":
        items = spec.get("items")
        if not isinstance(items, Mapping):
            raise UnusableQuestionError(f"its field {name!r} is a list without options")
        options = _options(name, items)
        chosen = tuple(value for value in default if value in {o.value for o in options}) if _strings(default) else None
        return FormField(
            kind=FieldKind.CHOICES,
            options=options,
            min_items=_int_or_none(spec.get("minItems")),
            max_items=_int_or_none(spec.get("maxItems")),
            default=chosen or None,
            **common,
        )
    raise UnusableQuestionError(f"its field {name!r} has the type {kind!r}, which a chat form cannot ask for")


def _options(name: str, spec: Mapping[str, Any]) -> tuple[Option, ...]:
    """The options of a choice: `enum` (with `enumNames`), or `oneOf`/`anyOf` of `const` and `title`."""
    listed = spec.get("oneOf") or spec.get("anyOf")
    if isinstance(listed, list):
        pairs = [(item.get("const"), item.get("title")) for item in listed if isinstance(item, Mapping)]
        if len(pairs) != len(listed) or not all(isinstance(value, str) for value, _ in pairs):
            raise UnusableQuestionError(f"its field {name!r} offers options that are not text")
        options = tuple(Option(value=str(value), label=_text(title) or str(value)) for value, title in pairs)
    else:
        values = spec.get("enum")
        if not _strings(values) or not values:
            raise UnusableQuestionError(f"its field {name!r} offers options that are not text")
        names = spec.get("enumNames")
        labels = list(names) if _strings(names) and len(names) == len(values) else list(values)
        options = tuple(
            Option(value=value, label=_text(label) or value) for value, label in zip(values, labels, strict=True)
        )
    if not options:
        raise UnusableQuestionError(f"its field {name!r} offers no options")
    if len(options) > MAX_OPTIONS:
        raise UnusableQuestionError(f"its field {name!r} offers {len(options)} options, over {MAX_OPTIONS}")
    return options


def read_answer(form: Form, raw: Mapping[str, object]) -> dict[str, Any]:
    """The content of an accepted form, from what the person entered, in the schema's types.

    Args:
        form: the question.
        raw: what each input gave, by field name: text (`str`) from a text box, whatever a
            field's kind; a `bool` from a checkbox; the field's `Option` picked in a select (a
            blank option value is then an answer, not an empty field); a list of `Option`s (or
            option values or labels) from a multi-select; None, "" or a missing name for a
            field left empty. Text is read by the
            field's kind: "42" for an integer, "yes"/"no" (or true/false, y/n, 1/0, on/off) for
            a boolean, an option's value or label (any case) for a choice, and values or labels
            separated by commas for a multi-select.

    Returns:
        The content to send: every field that was filled in, in its type; an optional field
        left empty is left out.

    Raises:
        AnswerError: a required field is empty, a value cannot be read as its field's kind, or
            the content does not validate against the server's schema (the first problem, in
            words, with its field).
    """
    content: dict[str, Any] = {}
    for spec in form.fields:
        value = _read(spec, raw.get(spec.name))
        if value is None:
            if spec.required:
                raise AnswerError(f"{_named(spec)} is required.", field=spec.name)
            continue
        content[spec.name] = value
    return check_content(form, content)


def check_content(form: Form, content: Mapping[str, Any]) -> dict[str, Any]:
    """`content` when it validates against the form's schema (formats included), as a plain dict.

    Raises:
        AnswerError: the first problem, in words, naming the field by its label.
    """
    unknown = sorted(set(content) - {spec.name for spec in form.fields})
    if unknown:
        raise AnswerError(f"The form has no field {_clip(unknown[0])!r}.", field=unknown[0])
    for asked in form.fields:
        value = content.get(asked.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise AnswerError(f"{_named(asked)}: enter a number.", field=asked.name)  # JSON has no NaN
    validator = Draft202012Validator(dict(form.schema), format_checker=FormatChecker())
    try:
        error = best_match(validator.iter_errors(dict(content)))
    except (ArithmeticError, ValueError, RecursionError):
        # A number too large to compare as a float (`multipleOf: 0.1` of a 400-digit integer), say.
        raise AnswerError("The answer cannot be checked against the server's form: a value is too large.") from None
    if error is None:
        return dict(content)
    name = str(error.absolute_path[0]) if error.absolute_path else None
    spec = next((f for f in form.fields if f.name == name), None)
    label = _named(spec) if spec is not None else "The answer"
    raise AnswerError(f"{label}: {_problem(error.validator, error.validator_value, error.message)}", field=name)


def check_answer(question: Question, answer: Answer) -> Answer:
    """`answer` when it fits `question`: content only for an accepted form, and valid there.

    An accepted link, a decline and a cancel carry no content (any given is dropped).

    Raises:
        AnswerError: an accepted form without content, or content that does not validate.
    """
    if answer.action is not Action.ACCEPT or isinstance(question, LinkRequest):
        return Answer(action=answer.action)
    if answer.content is None:
        raise AnswerError("An accepted form needs its fields filled in.")
    return Answer(action=Action.ACCEPT, content=check_content(question, answer.content))


def _read(spec: FormField, value: object) -> Any:
    """One entered value in its field's type; None when empty (`read_answer`)."""
    if isinstance(value, Option):
        picked = _picked(spec, value)
        return [picked] if spec.kind is FieldKind.CHOICES else picked
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if spec.kind is FieldKind.CHOICES:
        options = _Options(spec)
        if isinstance(value, str):
            return options.split(value) or None
        if not isinstance(value, list | tuple):
            raise AnswerError(f"{_named(spec)}: choose from the options.", field=spec.name)
        chosen = [
            _picked(spec, item) if isinstance(item, Option) else options.find(str(item))
            for item in value
            if isinstance(item, Option) or str(item).strip()
        ]
        return chosen or None
    if isinstance(value, bool) and spec.kind is FieldKind.BOOLEAN:
        return value
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise AnswerError(f"{_named(spec)}: this value cannot be read.", field=spec.name)
    text = str(value).strip()
    if spec.kind is FieldKind.TEXT:
        return str(value) if isinstance(value, str) else text
    if spec.kind is FieldKind.CHOICE:
        return _option(spec, str(value))
    if spec.kind is FieldKind.BOOLEAN:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise AnswerError(f"{_named(spec)}: answer yes or no.", field=spec.name)
    return _number(spec, text)


def _number(spec: FormField, text: str) -> int | float:
    """`text` as the field's number (`read_answer`)."""
    if spec.kind is FieldKind.INTEGER:
        try:
            whole = int(text)
        except ValueError:
            raise AnswerError(f"{_named(spec)}: enter a whole number.", field=spec.name) from None
        try:
            float(whole)  # a number JSON readers (and the schema's bounds) can compare
        except OverflowError:
            raise AnswerError(f"{_named(spec)}: this number is too large.", field=spec.name) from None
        return whole
    try:
        number = float(text)
    except ValueError:
        raise AnswerError(f"{_named(spec)}: enter a number.", field=spec.name) from None
    if not math.isfinite(number):
        raise AnswerError(f"{_named(spec)}: enter a number.", field=spec.name)
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def option_text(spec: FormField, option: Option) -> str:
    """What a person types to name `option` of `spec`, for a choice asked in a text box.

    Its label, or its value when the label does not read back as this option alone
    (`read_answer` tries values first, the first of repeated labels wins, and a label with
    more than 20 commas is not matched whole).
    """
    try:
        named = _Options(spec).split(option.label)
    except AnswerError:
        named = []
    return option.label if named == [option.value] else option.value


def _picked(spec: FormField, option: Option) -> str:
    """The value of `option`, picked in a select (`read_answer`).

    Raises:
        AnswerError: it is not one of the field's options.
    """
    if spec.kind not in (FieldKind.CHOICE, FieldKind.CHOICES) or option not in spec.options:
        raise AnswerError(f"{_named(spec)}: choose one of the options.", field=spec.name)
    return option.value


def _option(spec: FormField, text: str) -> str:
    """The option value `text` names (`read_answer`); see `_Options.find`."""
    return _Options(spec).find(text)


class _Options:
    """A field's options looked up by what a person gives: an option's value or label (`read_answer`).

    Tried in turn: a value exactly, a label exactly, then either without the spaces around
    them and in any case; the first option that fits wins.
    """

    def __init__(self, spec: FormField) -> None:
        self.spec = spec
        self.exact: dict[str, str] = {}
        self.folded: dict[str, str] = {}
        for option in spec.options:
            self.exact.setdefault(option.value, option.value)
            self.folded.setdefault(option.value.strip().casefold(), option.value)
        for option in spec.options:
            self.exact.setdefault(option.label, option.value)
            self.folded.setdefault(option.label.casefold(), option.value)
        self.commas = min(max(text.count(",") for option in spec.options for text in (option.value, option.label)), 20)

    def get(self, text: str) -> str | None:
        """The option value `text` names, else None."""
        found = self.exact.get(text)
        return found if found is not None else self.folded.get(text.strip().casefold())

    def find(self, text: str) -> str:
        """The option value `text` names.

        Raises:
            AnswerError: no option is named so.
        """
        found = self.get(text)
        if found is not None:
            return found
        spec = self.spec
        shown = ", ".join(_clip(option.label, 30) for option in spec.options[:10])
        more = ", ..." if len(spec.options) > 10 else ""
        raise AnswerError(
            f"{_named(spec)}: {text.strip()[:100]!r} is not one of the options ({shown}{more}).", field=spec.name
        )

    def split(self, text: str) -> list[str]:
        """The option values named in `text`, separated by commas (an option whose words hold commas matches whole).

        Raises:
            AnswerError: a part names no option.
        """
        parts = text.split(",")
        chosen: list[str] = []
        start = 0
        while start < len(parts):
            if not parts[start].strip():
                start += 1
                continue
            for end in range(min(len(parts), start + self.commas + 1), start, -1):
                piece = ",".join(parts[start:end])
                # Exactly as typed after the ", " between options (" a " stays itself), else loosely.
                found = self.exact.get(piece.removeprefix(" ")) if start else None
                found = found if found is not None else self.get(piece)
                if found is not None:
                    chosen.append(found)
                    start = end
                    break
            else:
                chosen.append(self.find(parts[start]))  # raises: no option is named so
                start += 1
        return chosen


def _problem(validator: object, expected: object, message: str) -> str:
    """A jsonschema error in words a person reads, for the usual keywords; else jsonschema's own."""
    words = {
        "minLength": f"enter at least {expected} characters.",
        "maxLength": f"enter at most {expected} characters.",
        "minimum": f"must be at least {expected}.",
        "maximum": f"must be at most {expected}.",
        "minItems": f"choose at least {expected}.",
        "maxItems": f"choose at most {expected}.",
        "format": f"this is not a valid {expected}.",
        "enum": "choose one of the options.",
        "type": f"enter a value of type {expected}.",
    }
    return words.get(str(validator), message[:300] + ("" if message.endswith(".") else "."))


def _named(spec: FormField) -> str:
    """A field's label as an `AnswerError` names it: cut to `LABEL_IN_ERROR_CHARS`."""
    return _clip(spec.label)


def _clip(text: str, limit: int = LABEL_IN_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _refused_keyword(schema: object) -> str | None:
    """The first of `_REFUSED_KEYWORDS` used anywhere in `schema`, else None (`form_of`)."""
    if isinstance(schema, list):
        return next((found for item in schema if (found := _refused_keyword(item)) is not None), None)
    if not isinstance(schema, Mapping):
        return None
    for key, value in schema.items():
        if key in _REFUSED_KEYWORDS:
            return str(key)
        if key in _DATA_KEYWORDS:
            continue
        inner = list(value.values()) if key in _NAMED_SCHEMAS and isinstance(value, Mapping) else value
        found = _refused_keyword(inner)
        if found is not None:
            return found
    return None


def _unsafe_in_url(url: str) -> bool:
    """Whether `url` holds whitespace, control, invisible (a direction override, say) or unassigned characters."""
    return any(char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn") for char in url)


def _text(value: object) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number_or_none(value: object) -> float | None:
    return float(value) if _is_number(value) else None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _in(value: object, options: tuple[Option, ...]) -> str | None:
    return value if isinstance(value, str) and value in {option.value for option in options} else None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
