"""The canonical form of http_request arguments: one spelling per request, refusals with reasons."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.base.errors import InvalidArgumentsError
from bot.tools.http_url import canonical_http_request_args, canonical_url
from tests.support.url_spellings import BASE_URLS, spellings


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("HTTPS://Internal.Example/a", "https://internal.example/a"),
        ("https://internal.example:443/a", "https://internal.example/a"),
        ("HTTPS://INTERNAL.EXAMPLE:443/a", "https://internal.example/a"),  # httpx alone keeps this :443
        ("http://internal.example:80", "http://internal.example/"),
        ("http://internal.example:8080/a", "http://internal.example:8080/a"),
        ("https://internal.example:0443/a", "https://internal.example/a"),
        ("https://@internal.example/a", "https://internal.example/a"),
        ("https://internal.example./a", "https://internal.example/a"),
        ("https://bücher.example/a", "https://xn--bcher-kva.example/a"),
        ("https://XN--BCHER-KVA.example/a", "https://xn--bcher-kva.example/a"),
        (" \thttps://internal.example/a\n", "https://internal.example/a"),
        ("https://internal.example/x/../a", "https://internal.example/a"),
        ("https://internal.example/x/%2e%2E/a", "https://internal.example/a"),
        ("https://internal.example/a/./b/.", "https://internal.example/a/b"),  # as httpx sends it
        ("https://internal.example/a/b/%2e", "https://internal.example/a/b"),
        ("https://internal.example/../../a", "https://internal.example/a"),
        ("https://internal.example/a#admin", "https://internal.example/a"),
        ("https://internal.example/%7e%3aA%41", "https://internal.example/~%3AAA"),
        ("https://internal.example/100%", "https://internal.example/100%25"),
        ("https://internal.example?q=%7e", "https://internal.example/?q=~"),
        ("https://internal.example/a?", "https://internal.example/a"),
        ("https://internal.example/a b", "https://internal.example/a%20b"),
        ("https://[0:0::1]:443/a", "https://[::1]/a"),
        ("http://127.0.0.1./a", "http://127.0.0.1/a"),
    ],
)
def test_spellings_of_one_request_have_one_canonical_url(written, canonical):
    """Case, default ports, empty userinfo, trailing dots, IDNA, whitespace, dot segments, fragments collapse."""
    assert canonical_url(written) == canonical
    assert canonical_url(canonical) == canonical


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("https://user@internal.example/", "user name or password"),
        ("https://user:secret@internal.example/", "user name or password"),
        ("https://internal.example\\@evil.example/", "user name or password"),
        ("https://internal%2Eexample/", "not a valid host name"),
        ("https://internal.example\\x/", "not a valid host name"),
        ("https://a..b/", "not a valid host name"),
        ("https://\uff29\uff2e\uff34\uff25\uff32\uff2e\uff21\uff2c.example/", "invalid URL"),  # full-width: not IDNA
        ("http://127.1/", "four decimal numbers"),
        ("http://2130706433/", "four decimal numbers"),
        ("http://0x7f.0.0.1/", "four decimal numbers"),
        ("https://[fe80::1%25eth0]/", "zone id"),
        ("https://internal.example:65536/", "invalid port"),
        ("ftp://internal.example/", "absolute http:// or https:// URL"),
        ("https:/internal.example/", "absolute http:// or https:// URL"),
        ("/relative", "absolute http:// or https:// URL"),
        ("https://internal.exa\tmple/", "invalid URL"),
        ("https://internal.example//admin", "empty segment"),
        ("https://internal.example/public//admin", "empty segment"),
        ("https://internal.example/a/..//admin", "empty segment"),
        ("https://internal.example/public/..%2Fadmin", "encoded `/`"),
        ("https://internal.example/public/%2e%2e%2fadmin", "encoded `/`"),
        ("https://internal.example/public%5C..%5Cadmin", "encoded backslash"),
        ("https://internal.example/public\\..\\admin", "backslash"),
        ("https://internal.example/public/..;/admin", "`;`"),
        ("https://internal.example/public/.;/admin", "`;`"),
        ("https://internal.example/public/%2e%2e;jsessionid=1/admin", "`;`"),
        ("https://internal.example/admin;x/reset", "`;`"),
        ("https://internal.example/admin%00.png", "NUL"),
        ("https://xn--zz.example/", "not a valid internationalised (IDNA) name"),
        ("https://www.XN--ZZ.example/", "not a valid internationalised (IDNA) name"),
        ("https://xn--.example/", "not a valid internationalised (IDNA) name"),
        ("https://xn--fa-hia.a_b/", "not a valid internationalised (IDNA) name"),  # httpx could not show it
        ("https://internal.example/admin./users", "ending in `.` or a space"),
        ("https://internal.example/admin%2E/users", "ending in `.` or a space"),
        ("https://internal.example/admin%20/users", "ending in `.` or a space"),
        ("https://internal.example/admin .../users", "ending in `.` or a space"),
        ("https://internal.example/a/...", "ending in `.` or a space"),
        ("https://internal.example/report.", "ending in `.` or a space"),
    ],
)
def test_urls_without_a_safe_spelling_are_refused_with_a_reason(written, reason):
    """Userinfo, odd hosts, old IPv4 spellings, zone ids, bad ports and other schemes are refused, saying why."""
    with pytest.raises(InvalidArgumentsError) as refused:
        canonical_url(written)
    assert reason in refused.value.message
    assert refused.value.field == "args.url"


def test_the_canonical_arguments_upper_case_the_method_and_lower_case_header_names():
    """Method upper-case, URL canonical, header names lower case (as HTTP/2 sends them), values
    without surrounding blanks; the values' own case and the body untouched."""
    args = {
        "method": "post",
        "url": "HTTPS://Internal.Example:443/a",
        "headers": {"X-Trace": " Abc\t", "accept": "application/json", "X-SUDO": "Yes"},
        "body": {"Keep": "AS IS"},
    }
    canonical = canonical_http_request_args(args)
    assert canonical == {
        "method": "POST",
        "url": "https://internal.example/a",
        "headers": {"x-trace": "Abc", "accept": "application/json", "x-sudo": "Yes"},
        "body": {"Keep": "AS IS"},
    }
    assert canonical_http_request_args(canonical) == canonical


@pytest.mark.parametrize("name", ["Bad Name", "x:y", "", "caf\u00e9", "X-\uff33udo"])
def test_a_header_name_that_is_no_http_name_is_refused(name):
    """Only RFC 9110 tokens are header names: a look-alike cannot pass a condition as another name."""
    with pytest.raises(InvalidArgumentsError, match="not a valid header name") as refused:
        canonical_http_request_args({"method": "GET", "url": "https://h/", "headers": {name: "x"}})
    assert refused.value.field == "args.headers"


@pytest.mark.parametrize("name", ["x_sudo", "X_Sudo", "x-sudo_", "_"])
def test_a_header_name_with_an_underscore_is_refused(name):
    """CGI, PHP and Rack read `x_sudo` as `x-sudo` (both are HTTP_X_SUDO): a rule on `'x-sudo'` would miss it,
    so the name is refused, saying to write `-`."""
    with pytest.raises(InvalidArgumentsError, match="has a `_`") as refused:
        canonical_http_request_args({"method": "GET", "url": "https://h/", "headers": {name: "yes"}})
    assert "write `-` instead" in refused.value.message
    assert refused.value.field == "args.headers"


@pytest.mark.parametrize("url", ["https://xn--bcher-kva.example/a", "https://h/.well-known/x", "https://h/v1.0/a"])
def test_valid_punycode_and_dots_inside_a_segment_are_kept(url):
    """A valid `xn--` host, a segment starting with a dot and a dot inside a segment are no trailing-dot case."""
    assert canonical_url(url) == url


def test_headers_differing_only_in_case_are_refused():
    """Two headers that are one header in HTTP are refused rather than one silently dropped."""
    with pytest.raises(InvalidArgumentsError, match="given twice"):
        canonical_http_request_args({"method": "GET", "url": "https://h/", "headers": {"Accept": "a", "accept": "b"}})


@settings(max_examples=200, deadline=None)
@given(
    headers=st.dictionaries(
        st.text("xX-sSuUdDoO", min_size=1, max_size=6), st.text(" \tyesYES", max_size=6), max_size=4
    )
)
def test_property_header_names_in_any_case_give_one_canonical_header_or_a_refusal(headers):
    """Headers either fold to lower-case names with trimmed values (idempotently), or two of them are one header."""
    folded = {name.lower() for name in headers}
    if len(folded) < len(headers):
        with pytest.raises(InvalidArgumentsError, match="given twice"):
            canonical_http_request_args({"method": "GET", "url": "https://h/", "headers": headers})
        return
    canonical = canonical_http_request_args({"method": "GET", "url": "https://h/", "headers": headers})["headers"]
    assert canonical == {name.lower(): value.strip(" \t") for name, value in headers.items()}
    again = canonical_http_request_args({"method": "GET", "url": "https://h/", "headers": canonical})
    assert again["headers"] == canonical


def test_values_of_unexpected_types_are_left_for_the_schema():
    """A non-string URL or method is not the canonical form's business: the schema refuses it."""
    assert canonical_http_request_args({"method": 1, "url": None, "headers": "x"}) == {
        "method": 1,
        "url": None,
        "headers": "x",
    }


@settings(max_examples=300, deadline=None)
@given(data=st.data(), base=st.sampled_from(BASE_URLS))
def test_property_every_spelling_of_a_url_has_the_base_as_canonical_form(data, base):
    """Whatever the spelling, the canonical URL is the base; httpx prints it unchanged; the form is idempotent."""
    written = data.draw(spellings(base))
    canonical = canonical_url(written)
    assert canonical == base, written
    assert str(httpx.URL(canonical)) == canonical
    assert canonical_url(canonical) == canonical


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60) | st.from_regex(r"\A[hH][tT]{2}[pP][sS]?://[^\s]{0,40}\Z"))
def test_property_canonical_url_is_idempotent_or_refuses(text):
    """Any text either has a canonical URL that is its own canonical form, or is refused with a reason."""
    try:
        canonical = canonical_url(text)
    except InvalidArgumentsError as refused:
        problem = refused.message
    else:
        problem = ""
        assert canonical_url(canonical) == canonical
        assert str(httpx.URL(canonical)) == canonical
        assert httpx.Request("GET", canonical).url == httpx.URL(canonical)  # httpx can build the request
    assert problem or canonical


_PATH_PIECES = [
    "/",
    "a",
    "admin",
    ".",
    "..",
    "%2e",
    "%2E%2e",
    ";",
    ";x=1",
    "%2f",
    "%2F",
    "%5c",
    "\\",
    "%00",
    "%3B",
    "~",
    "%20",
    "a.",
]


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PATH_PIECES), max_size=8))
def test_property_a_canonical_path_has_nothing_servers_resolve_differently(pieces):
    """Whatever the path, the URL is refused or its canonical path has no `//`, `;`, backslash, `%2F`, `%5C`, `%00`,
    no `.` or `..` segment and no segment ending in `.` or a space: every server reads its segments as a condition
    does."""
    try:
        canonical = canonical_url("https://internal.example/" + "".join(pieces))
    except InvalidArgumentsError:
        return  # refused: nothing is judged or sent
    path = httpx.URL(canonical).raw_path.decode("ascii")
    assert not any(bad in path for bad in ("//", ";", "\\", "%2F", "%5C", "%00")), canonical
    assert not {".", ".."} & set(path.split("/")), canonical
    assert not any(segment.endswith((".", "%20")) for segment in path.split("/")), canonical
