"""The web UI's "use my location" (core/here.py): a button that asks the browser only when
pressed, a location held in the page's script alone and counted down to its expiry, sent with
a chat turn and a ``near=here`` search, drawn on the result map as its own layer without its
numbers, and taken out of the address bar; and a document page with a point always has a map.

Server-rendered HTML is checked over the real server on loopback; the button, the countdown,
what the browser keeps and what the chat sends in headless Chromium (tests/helpers.py).
"""

import json
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM

from helpers import SCREENSHOTS, TEMPLE_PAGES, RunningServer, browser_page, chromium, wiki_dump

# near 浅草寺 (35.7147, 139.7967) and 雷門: digits no graticule label or place shares
LAT, LON, ACCURACY = 35.71234, 139.79567, 80.0
# the location's numbers to 3 decimals (110 m) or more, as a page could write them; a
# graticule line's label may fall on the same round 3 decimals ("35.712°N"): that is the
# map's grid, not the location
SECRET = re.compile(r"35\.712(?!°)|139\.795(?!°)")


def leaks(text: str) -> list[str]:
    return SECRET.findall(text)


PAGES = [
    *TEMPLE_PAGES,
    (
        3,
        "夏目漱石",  # 7 km from the temples: no neighbour within 2 km
        "'''夏目漱石'''は日本の小説家。生誕地は早稲田。{{Coord|35|42|20|N|139|43|10|E}}",
    ),
]
JA = {"accept-language": "ja"}
TTL = 300.0


def location(taken: datetime | None = None, accuracy: float | None = ACCURACY) -> str:
    at = (taken or datetime.now(UTC)).isoformat()
    return f"{LAT},{LON},{at}" + (f",{accuracy:g}" if accuracy is not None else "")


def map_of(page: str) -> str | None:
    found = re.search(r'<svg[^>]*class="map".*?</svg>', page, re.S)
    return found.group(0) if found else None


def here_layer(svg: str) -> str | None:
    found = re.search(r'<g class="map-here".*?</g>', svg, re.S)
    return found.group(0) if found else None


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    root = tmp_path_factory.mktemp("here")
    settings = Settings(data_dir=root / "data", query_timeout=10, location_ttl=TTL)
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES))
    building.ingest(Context(settings), "wikipedia", dump, "jawiki", embed=False)
    return settings


@pytest.fixture(scope="module")
def web(settings):
    with (
        RunningServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=JA) as client,
    ):
        yield client


# -- the server's pages ------------------------------------------------------------------------


def test_the_search_page_offers_the_button_and_the_ttl_but_holds_no_location(web):
    page = web.get("/", params={"source": "jawiki"}).text
    assert re.search(
        r'<button type="button" class="secondary here-button"[^>]*>現在地を使う<', page
    )
    assert "5分で消えます" in page  # the button's title: TTL 300 s
    config = json.loads(re.search(r'id="chiezo-config">(.*?)</script>', page).group(1))
    assert config["location_ttl"] == TTL
    assert config["messages"]["here.attached"].startswith("現在地を添付中")
    assert '<input type="hidden" name="location" id="here-location" disabled>' in page


def test_a_near_here_search_draws_the_location_as_its_own_layer_without_its_numbers(web):
    taken = datetime.now(UTC) - timedelta(seconds=30)
    response = web.get(
        "/",
        params={
            "q": "寺",
            "source": "jawiki",
            "near": "here",
            "radius_km": "2",
            "location": location(taken),
        },
    )
    assert response.status_code == 200, response.text[:500]
    page = response.text
    svg = map_of(page)
    layer = here_layer(svg)
    assert layer, "no current-location layer"
    expires = int(re.search(r'data-expires-at="(\d+)"', layer).group(1))
    assert abs(expires - (taken.timestamp() + TTL) * 1000) <= 1
    assert 'class="map-accuracy"' in layer and ">現在地</text>" in layer
    assert "<title>" not in layer and "data-lat" not in svg
    assert 'class="map-center"' not in svg  # the location is not a typed query point
    assert sorted(int(n) for n in re.findall(r'data-number="(\d+)"', svg)) == [1, 2]
    assert not leaks(page)  # not in the map, the links, the form: nowhere in the page
    assert "location=" not in page  # links (pager, language, facets) never carry it
    distances = re.findall(r'class="distance">([\d.]+) km<', page)
    assert len(distances) == 2  # each hit's distance from the location, never the location


def test_the_location_is_labelled_in_the_pages_language_and_drawn_for_a_filter_too(web):
    page = web.get(
        "/",
        params={"source": "jawiki", "near": "here", "radius_km": "2", "location": location()},
        headers={"accept-language": "en"},
    ).text
    layer = here_layer(map_of(page))
    assert layer and ">your location</text>" in layer
    assert not leaks(page)


def test_without_an_accuracy_there_is_no_circle(web):
    page = web.get(
        "/",
        params={
            "q": "寺",
            "source": "jawiki",
            "near": "here",
            "location": location(accuracy=None),
        },
    ).text
    layer = here_layer(map_of(page))
    assert layer and "map-accuracy" not in layer


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (location(datetime.now(UTC) - timedelta(seconds=TTL + 60)), "past its 300 s limit"),
        (f"{LAT},{LON},not-a-time", "not an ISO 8601 time"),
        (None, "Your location is not known"),  # near=here with nothing attached
    ],
)
def test_a_refused_location_draws_nothing_and_says_why(web, given, why):
    params = {"q": "寺", "source": "jawiki", "near": "here"}
    response = web.get("/", params=params | ({"location": given} if given else {}))
    assert response.status_code == 400
    alert = re.search(r'<div class="error" role="alert">(.*?)</div>', response.text, re.S)
    assert why in alert.group(1)
    assert 'class="secondary here-button"' in response.text  # the way to give one, at hand
    assert 'class="map-here"' not in response.text
    assert not leaks(response.text)


# -- a document's map --------------------------------------------------------------------------


def test_a_document_with_no_neighbours_still_shows_its_place(web):
    lonely = web.get("/doc/jawiki", params={"title": "夏目漱石"}, follow_redirects=True).text
    svg = map_of(lonely)
    assert svg, "a point with no neighbours got no map"
    assert '<g class="map-center"><title>夏目漱石</title>' in svg
    assert 'data-points="0"' in svg
    # no OSM boundaries there: a regional view, where Natural Earth's land shows the place
    assert 'class="map-land"' in svg
    caption = re.search(r'id="doc-map"><figcaption>(.*?)</figcaption>', lonely).group(1)
    assert "半径2 km以内にほかの地点はありません" in caption
    temple = web.get("/doc/jawiki", params={"title": "浅草寺"}, follow_redirects=True).text
    assert "半径2 km以内の1地点" in temple  # with a neighbour: the city-scale map as before


# -- in a browser ------------------------------------------------------------------------------


def answer(body: dict) -> dict:
    system = body["messages"][0]["content"]
    if "search queries" in system:
        return {"content": '{"queries": ["浅草寺"]}'}
    return {"content": "浅草寺は東京都台東区浅草にある寺です [1]。"}


@pytest.fixture(scope="module")
def site(settings):
    with ScriptedLLM(answer) as llm:
        configured = Settings(
            data_dir=settings.data_dir, llm_url=llm.url, llm_model="stub-model", location_ttl=TTL
        )
        with RunningServer(create_app(configured)) as server, chromium() as browser:
            yield browser, server.url


@pytest.fixture
def page(site, request):
    browser, base = site
    page = browser_page(
        browser,
        base,
        locale="en-US",
        geolocation={"latitude": LAT, "longitude": LON, "accuracy": ACCURACY},
        permissions=["geolocation"],
    )
    yield page
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
    page.context.close()
    assert not page.errors, f"script errors on the page: {page.errors}"


def kept_by_the_browser(page) -> str:
    """Everything the page could keep past itself: both storages and the cookies."""
    stored = page.evaluate(
        "() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage),"
        " document.cookie])"
    )
    return stored + json.dumps(page.context.cookies())


@pytest.mark.slow
def test_the_location_is_asked_on_the_press_sent_with_the_chat_and_kept_nowhere(page):
    sent = []
    page.route(
        "**/v1/chat",
        lambda route: (sent.append(route.request.post_data_json), route.continue_()),
    )
    page.goto(page.base + "/chat")
    status = page.locator(".chat-options .here-status")
    assert status.inner_text() == ""  # nothing asked on load
    page.click(".chat-options .here-button")
    page.wait_for_function(
        "() => /expires in \\d:\\d\\d/.test(document.querySelector('.here-status').textContent)"
    )
    assert not leaks(status.inner_text())
    page.fill("#chat-input", "浅草寺はどこ？")
    page.press("#chat-input", "Enter")
    page.wait_for_selector("li.message.assistant[data-state=done]")
    # done.stages, folded: one line per stage (plan, search, ..., model) with its seconds
    page.click("li.message.assistant details.stages summary")
    assert re.search(r"model · .* s · \d+ tokens in", page.inner_text("details.stages"))
    given = sent[0]["location"]
    assert (given["lat"], given["lon"], given["accuracy_m"]) == (LAT, LON, ACCURACY)
    taken = datetime.fromisoformat(given["taken_at"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - taken).total_seconds()) < 60
    kept = kept_by_the_browser(page)
    assert "浅草寺はどこ" in kept  # the conversation is kept for the tab (chat.js), ...
    assert not leaks(kept)  # ... the location nowhere
    assert not leaks(page.content())


@pytest.mark.slow
def test_a_near_here_search_leaves_no_location_in_the_address_and_the_map_expires(page):
    page.clock.install()  # the page's clock, moved on below to the location's expiry
    page.goto(page.base + "/?source=jawiki&lang=en")
    assert page.locator(".here-status").inner_text() == ""
    page.click(".here-button")
    page.wait_for_function(
        "() => /expires in/.test(document.querySelector('.here-status').textContent)"
    )
    assert page.input_value("input[name=near]") == "here"
    page.fill("input[name=q]", "寺")
    page.press("input[name=q]", "Enter")
    page.wait_for_selector("svg.map g.map-here")
    page.wait_for_function("() => !location.search.includes('location')")
    assert "near=here" in page.url and "location" not in page.url
    # the location came back into the script with the results: still counting down
    assert "expires in" in page.locator(".here-status").inner_text()
    assert not leaks(kept_by_the_browser(page) + page.content())
    page.clock.run_for(int(TTL * 1000) + 2000)
    assert page.locator("svg.map g.map-here").count() == 0
    assert "expired" in page.locator(".here-status").inner_text()
