"""Addresses a user gives, their credentials kept apart (core/addresses.py, SECURITY.md rule
3a): how an address is taken apart, what is recorded and shown, and a download mirror given
with a password — asked with it, named without it."""

from __future__ import annotations

import pytest

from chiezo.core.addresses import Address, Credentials, has_credentials
from chiezo.core.errors import InputError
from chiezo.ingest.download import get_text
from chiezo.store.source_info import without_credentials
from hostile_kiwix import HostileKiwix, Reply


@pytest.mark.parametrize(
    "given, url, user, password, params",
    [
        ("http://u:p%40ss@host:8090/v1?api_key=K", "http://host:8090/v1", "u", "p@ss", (("api_key", "K"),)),
        ("http://u@host", "http://host", "u", "", ()),
        ("https://[::1]:8081/v1", "https://[::1]:8081/v1", None, None, ()),
        ("http://host:8090", "http://host:8090", None, None, ()),
        ("not an address", "not an address", None, None, ()),
    ],
)  # fmt: skip
def test_an_address_is_taken_apart(given, url, user, password, params):
    address = Address.parse(given)
    assert address.url == url and address.params == params
    if user is None:
        assert address.credentials is None
    else:
        assert address.credentials == Credentials(user, password)
        assert password not in repr(address) + str(address) or not password


def test_what_is_shown_of_an_address_names_its_query_not_its_values():
    address = Address.parse("http://u:secret-password@h:1/v1?api_key=K3Y&x=1")
    assert address.shown() == "http://h:1/v1?api_key=***&x=***"
    assert repr(address.credentials) == "Credentials(***)"
    hidden = address.hidden("http://u:secret-password@h:1/v1?api_key=K3Y&x=1")
    assert hidden["u:secret-password@"] == "" and hidden["secret-password"] == "***"


def test_a_recorded_input_is_shown_without_credentials_however_deep():
    recorded = {
        "url": "http://kuser:KSECRETPW@127.0.0.1:8090",
        "options": {"mirror": "https://m:MIRRORPW@mirror.example/dumps", "language": "ja"},
        "paths": ["/data/a.zim", "ftp://x:FTPPW@h/f"],
        "articles": 3,
    }
    shown = without_credentials(recorded)
    assert "KSECRETPW" not in str(shown) and "MIRRORPW" not in str(shown)
    assert "FTPPW" not in str(shown)
    assert shown["url"] == "http://127.0.0.1:8090" and shown["articles"] == 3
    assert shown["paths"][0] == "/data/a.zim" and shown["options"]["language"] == "ja"
    assert not has_credentials("/srv/user:pw@folder") and has_credentials("http://a:b@h")


@pytest.mark.slow
def test_a_mirror_behind_a_password_is_asked_with_it_and_named_without_it():
    def reply(path: str) -> Reply:
        return Reply(type="text/plain", body=b"the file")

    with HostileKiwix(reply, user="mirroruser", password="MIRROR-PASSWORD") as mirror:
        given = mirror.url.replace("http://", "http://mirroruser:MIRROR-PASSWORD@")
        assert get_text(given + "/dumps/status.json") == "the file"
        assert mirror.asked[-1][1].startswith("Basic ")
        wrong = mirror.url.replace("http://", "http://mirroruser:WRONG-PASSWORD@")
        with pytest.raises(InputError) as refused:
            get_text(wrong + "/dumps/status.json")
    said = str(refused.value) + str(refused.value.to_dict("cli"))
    assert "HTTP 401" in said and "WRONG-PASSWORD" not in said and mirror.url in said
