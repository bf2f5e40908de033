from chiezo.search.rank import combined_score, rank_page, reciprocal_rank_fusion


def test_popularity_moves_a_document_up_but_only_by_up_to_forty_percent():
    assert combined_score(-10.0, 0.0) == -10.0
    assert combined_score(-10.0, 1.0) == -14.0
    assert combined_score(-10.0, 5.0) == -14.0  # unnormalised popularity is clamped


def test_title_matches_come_first_then_combined_score():
    ranks = [0.0, 1.0, 0.0, 0.0]
    rows = [(1, -5.0), (2, -4.0), (3, -9.0), (4, -1.0)]
    page = rank_page(rows, ranks, title_ids=[4], upto=4)
    assert [c.doc_id for c in page] == [4, 3, 2, 1]  # doc 2: -4 * 1.4 = -5.6 beats -5.0
    assert page[0].title_match and page[0].bm25 == -1.0


def test_rank_page_keeps_only_what_is_asked_for():
    rows = [(i, -float(i)) for i in range(1, 1001)]
    page = rank_page(rows, [0.0] * 1000, upto=3)
    assert [c.doc_id for c in page] == [1000, 999, 998]


def test_ties_go_to_the_more_popular_document():
    page = rank_page([(7, -2.0), (3, -2.0)], [0.0] * 10, upto=2)
    assert [c.doc_id for c in page] == [3, 7]


def test_reciprocal_rank_fusion_rewards_agreement():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a", "d"], ["b"]])
    assert [item for item, _ in fused][:2] == ["b", "a"]
    assert {item for item, _ in fused} == {"a", "b", "c", "d"}
