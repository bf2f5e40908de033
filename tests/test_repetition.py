"""The guards that tell a reply gone wrong from an answer (answer/repetition.py): loops seen
as they stream, replies with nothing usable in them."""

from chiezo.answer.repetition import LoopGuard, unusable


def test_a_loop_the_sampler_varies_is_a_loop_too():
    guard = LoopGuard()
    text = "Alabama is a state [1]. " + "".join(
        f"The library's website does not give a definitive answer to question {n}. "
        for n in range(6)
    )
    assert any(guard.feed(text[i : i + 5]) for i in range(0, len(text), 5))
    assert guard.kept.endswith("question 0.")


def test_an_answer_that_names_things_in_turn_is_no_loop():
    guard = LoopGuard()
    text = (
        "| 年 | 出来事 |\n| --- | --- |\n| 1867 | 生まれる |\n| 1916 | 没する |\n"
        "夏目漱石は1867年に生まれた [1]。1916年に没した [1]。代表作は『坊っちゃん』 [1]。"
        "Ray Charles was born in 1930 [2]. He was a singer [2]. He was a pianist [2]."
    )
    assert not any(guard.feed(text[i : i + 3]) for i in range(0, len(text), 3))


def test_unusable_tells_an_answer_from_an_echo():
    assert unusable("2011年現在、約225万人 [1]", "パリの人口は？") is None
    assert unusable("パリの人口は？", "パリの人口は？") == "echo"
    assert unusable("[1]", "x") == "empty"
    rules = "Answer briefly, in the language of the question. Cite every fact as [1]."
    assert unusable("Answer briefly, in the language of the question.", "x", rules) == "echo"
    assert unusable("The capital is Matsue, in the language of Izumo [1].", "x", rules) is None
    asked_for = "you may answer from your own knowledge but must begin with (not from the library)"
    assert unusable("(not from the library) 42", "x", asked_for) is None


# -- deadlines ------------------------------------------------------------------------------------
