from chiezo.search.hybrid import fuse
from chiezo.search.rank import combined_score, rank_page


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
    """fusion=rrf (hybrid.fuse): the ranks count, not the scores, and a document both sides
    found beats the first of either side alone."""
    keyword = [(1, 9.0), (2, 5.0), (3, 1.0)]
    semantic = [(2, 0.3), (4, 0.2)]
    fused = fuse(keyword, semantic, method="rrf")
    assert [f.doc_id for f in fused][:2] == [2, 1]
    assert {f.doc_id for f in fused} == {1, 2, 3, 4}
    assert fused[0].keyword_rank == 2 and fused[0].semantic_rank == 1
