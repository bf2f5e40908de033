"""Names in questions (search/names.py, issue #43 item 6): a phrase of a question that is a
document's title stands for that document in any question form — "Who was Ray Charles?" puts
the article first although "Ray Charles discography" and the albums hold his name in their
titles — while a capitalised opening word or a stop word that is also a title does not."""

import pytest

from chiezo.core.config import Settings
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.search.names import question_names

from helpers import data_file, wiki_library

RAY = "zim/libkiwix_zimfile_raycharles.zim"
JAWIKI = "wikipedia/jawiki-20230501-excerpt.xml.bz2"


@pytest.fixture(scope="module")
def ray(tmp_path_factory):
    service = Context(Settings(data_dir=tmp_path_factory.mktemp("names") / "data"))
    report = building.ingest(service, "zim", data_file(RAY), "ray")
    assert report.docs == 127
    building.embed(
        service, "ray", "use-m"
    )  # hybrid search, the default with vectors, as well (2 s)
    return service


@pytest.fixture(scope="module")
def jawiki(tmp_path_factory):
    service = Context(Settings(data_dir=tmp_path_factory.mktemp("names-ja") / "data"))
    building.ingest(service, "wikipedia", data_file(JAWIKI), "jawiki", embed=False)
    return service


def titles(service, query: str, source: str, limit: int = 10, mode: str | None = None):
    request = SearchRequest.of(query=query, source=source, limit=limit, mode=mode)
    return [h.title for h in searching.search(service, request).hits]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(
    "question",
    [
        "Who was Ray Charles?",
        "Tell me about Ray Charles",
        "What is Ray Charles known for?",
        "When did Ray Charles die?",
        "who was ray charles",
    ],
)
def test_an_english_question_names_the_article_before_titles_that_contain_the_name(
    ray, question, mode
):
    # the source holds longer titles that contain the name: they ranked first before
    longer = titles(ray, "Ray Charles", "ray", limit=50)
    assert "Ray Charles discography" in longer and "Ray Charles Live" in longer
    found = titles(ray, question, "ray", mode=mode)
    assert found[0] == "Ray Charles"
    assert found.count("Ray Charles") == 1


@pytest.mark.parametrize(
    "question",
    ["Ray Charles とは？", "Ray Charlesについて教えて", "Ray Charlesはどこで生まれましたか"],
)
def test_a_japanese_question_form_names_the_article_too(ray, question):
    assert titles(ray, question, "ray")[0] == "Ray Charles"


def test_the_longest_title_in_the_question_is_the_name(ray):
    # "Ray Charles Live" is a title, and "Ray Charles" inside it is not a name of its own
    assert titles(ray, "When was Ray Charles Live released?", "ray")[0] == "Ray Charles Live"
    # a title written with a qualifier is named by the phrase before it
    assert titles(ray, "Tell me about Unchain My Heart", "ray")[0] == "Unchain My Heart (song)"


def test_a_name_that_only_describes_what_is_asked_does_not_lead(ray):
    # "Ray Charles" is 2 of the question's 7 content words: the album is asked for
    question = "Which Ray Charles album was recorded at the Newport Jazz Festival in 1958?"
    assert titles(ray, question, "ray")[0] == "Ray Charles at Newport"


@pytest.mark.parametrize(
    ("question", "title"), [("地理について教えて", "地理"), ("記録について教えて", "記録")]
)
def test_a_japanese_name_leads_in_a_jawiki_question(jawiki, question, title):
    # before, the articles that mention 地理 or 記録 most often came first
    assert titles(jawiki, question, "jawiki")[0] == title


def test_a_title_inside_a_japanese_compound_noun_is_no_name(jawiki):
    conn = jawiki.library.get("jawiki").conn
    assert [n.phrase for n in question_names(conn, "日本語について教えて")] == ["日本語"]
    # 日本語教育 is Japanese-language teaching, not the article 日本語
    assert question_names(conn, "日本語教育について教えて") == []


@pytest.fixture(scope="module")
def openers(tmp_path_factory):
    """A wiki whose titles include a question's opening words ("What", "Tell")."""
    root = wiki_library(
        tmp_path_factory.mktemp("openers"),
        [
            (1, "What", "What is an interrogative word. What is also a 1981 single by Soft Cell."),
            (2, "Tell", "Tell is a mound of ruins; William Tell is a Swiss folk hero."),
            (3, "Ray Charles", "Ray Charles was an American singer and pianist, the Genius."),
            (4, "Ray Charles discography", "A discography of Ray Charles: albums and singles."),
        ],
        name="openers",
    )
    return Context(Settings(data_dir=root / "data"))


@pytest.mark.parametrize(
    "question",
    [
        "What is Ray Charles known for?",
        "Tell me about Ray Charles",
        "Tell me what a discography is",
    ],
)
def test_a_capitalised_opening_word_that_is_a_title_is_not_a_name(openers, question):
    conn = openers.library.get("openers").conn
    assert not {"what", "tell"} & {n.phrase for n in question_names(conn, question)}
    if "Ray Charles" in question:
        assert titles(openers, question, "openers")[0] == "Ray Charles"
