"""The web UI's words in Japanese and English, and which language a request gets.

The language follows, in order: ``?lang=`` (remembered in a cookie), the cookie, the browser's
``Accept-Language`` (the first of ja/en it prefers), and otherwise Japanese — the first language
of the project. Messages are ``{name}`` templates; the scripts get the same catalog as JSON so a
string is written once for both server and browser.
"""

from __future__ import annotations

from starlette.requests import Request

LANGUAGES = ("ja", "en")
DEFAULT = "ja"
COOKIE = "chiezo_lang"

# name: (Japanese, English)
MESSAGES: dict[str, tuple[str, str]] = {
    # navigation and frame
    "nav.search": ("検索", "Search"),
    "nav.chat": ("チャット", "Chat"),
    "nav.admin": ("管理", "Admin"),
    "tagline": ("手元で引けるAIのための知識ベース", "An offline knowledge base for AI"),
    "footer": (
        "すべてこのマシンの中で動いています。外部には何も送りません。",
        "Everything runs on this machine; nothing is sent anywhere.",
    ),
    "lang.switch": ("English", "日本語"),
    # search
    "search.placeholder": (
        "調べたいこと（例: 浅草寺、夏目漱石 生年）",
        "What to look up (e.g. Senso-ji, Natsume Soseki born)",
    ),
    "search.button": ("検索", "Search"),
    "search.all_sources": ("すべてのソース", "All sources"),
    "search.source": ("ソース", "Source"),
    "search.mode": ("方式", "Mode"),
    "mode.default": ("自動", "Automatic"),
    "mode.auto": ("必要なときだけ意味検索", "Meaning only when needed"),
    "mode.keyword": ("キーワード", "Keyword"),
    "mode.semantic": ("意味", "Semantic"),
    "mode.hybrid": ("ハイブリッド", "Hybrid"),
    "mode.no_vectors": (
        "このソースにはベクトルがないため、キーワード検索のみです",
        "This source has no vectors: keyword search only",
    ),
    "filters": ("絞り込み", "Filters"),
    "filter.tag": ("タグ", "Tag"),
    "filter.feature": ("種類 (key=value)", "Feature (key=value)"),
    "filter.area": ("地域", "Area"),
    "filter.near": ("近く (緯度,経度 または 記事名)", "Near (lat,lon or a title)"),
    "filter.radius": ("半径 km", "Radius km"),
    "filter.within": (
        "範囲 (GeoJSON, 南,西,北,東, または OSMソース:地域名)",
        "Within (GeoJSON, S,W,N,E, or osm_source:area)",
    ),
    "filter.only_one_source": (
        "絞り込みはソースを一つ選ぶと使えます",
        "Choose one source to filter",
    ),
    "facets.title": ("絞り込み", "Refine"),
    "facets.remove": ("この条件を外す", "remove this condition"),
    "facets.of_first": ("上位{n}件の内訳", "among the first {n}"),
    "facet.source": ("ソース", "Source"),
    "facet.tag": ("タグ", "Tag"),
    "facet.feature": ("種類", "Feature"),
    "facet.area": ("地域", "Area"),
    "results.count": ("{total}件", "{total} results"),
    "results.count_at_least": ("{total}件以上", "at least {total} results"),
    "results.range": ("{first}–{last}件目", "{first}–{last}"),
    "results.none": ("見つかりませんでした。", "Nothing found."),
    "results.prev": ("← 前へ", "← Previous"),
    "results.next": ("次へ →", "Next →"),
    "results.found_by": ("検索方式: {how}", "Found by: {how}"),
    "how.keyword": ("キーワード", "keyword"),
    "how.semantic": ("意味", "meaning"),
    "how.hybrid": ("ハイブリッド（キーワード＋意味）", "hybrid (keyword + meaning)"),
    "how.keyword-fallback": (
        "キーワード（意味検索が時間切れ）",
        "keyword (search by meaning ran out of time)",
    ),
    "how.filter": ("絞り込み（全件を正確に数えています）", "filters (every match counted)"),
    "map.more": ("ほか{n}地点を小さな点で表示", "{n} more matches shown as small dots"),
    "results.distance": ("{km} km", "{km} km"),
    "results.nearest_first": ("近い順", "nearest first"),
    "home.sources": ("ソース", "Sources"),
    "home.docs": ("{docs}件の文書", "{docs} documents"),
    "home.random": ("ランダムに1件", "a random document"),
    "home.empty": (
        "まだソースがありません。`chiezo ingest docs PATH --name NAME` で作れます。",
        "No sources yet. Build one with `chiezo ingest docs PATH --name NAME`.",
    ),
    # map
    "map.title": ("地図", "Map"),
    "map.points": ("{n}地点", "{n} places"),
    "map.nearby": (
        "この文書の地点（◎）と半径{km} km以内の{n}地点",
        "This document's place (◎) and {n} places within {km} km",
    ),
    "map.alone": (
        "この文書の地点（◎）· 半径{km} km以内にほかの地点はありません",
        "This document's place (◎) · no other places within {km} km",
    ),
    "map.here": ("現在地", "your location"),
    "map.offline": (
        "オフライン地図（海岸線・国境: Made with Natural Earth、行政界: 構築済みの OSM ソース）",
        "Offline map (coasts and borders: Made with Natural Earth; admin areas: your OSM sources)",
    ),
    # doc page
    "doc.opening": ("冒頭", "Opening"),
    "doc.body": ("本文", "Text"),
    "doc.tags": ("タグ", "Tags"),
    "doc.links": ("リンク", "Links"),
    "doc.links_in": ("この文書へのリンク", "Linked from"),
    "doc.attributes": ("属性", "Attributes"),
    "doc.aliases": ("別名", "Also known as"),
    "doc.coordinates": ("座標", "Coordinates"),
    "doc.nearby": ("近くを探す", "Find nearby"),
    "doc.original": ("元の文書", "Original"),
    "doc.source_line": ("出典", "Source"),
    "doc.not_found": ("文書が見つかりません", "Document not found"),
    "doc.did_you_mean": ("もしかして:", "Did you mean:"),
    "doc.truncated": (
        "（長いため {shown} / {total} 文字を表示）",
        "(long: showing {shown} of {total} characters)",
    ),
    "doc.show_all": ("全文を表示", "Show everything"),
    # errors
    "error.title": ("エラー", "Error"),
    # admin
    "admin.title": ("管理", "Administration"),
    "admin.sources": ("長期保存のソース", "Long-term sources"),
    "admin.col.docs": ("文書数", "Documents"),
    "admin.col.size": ("サイズ", "Size"),
    "admin.col.generation": ("世代", "Generation"),
    "admin.col.built_at": ("作成日時", "Built at"),
    "admin.col.schema": ("スキーマ", "Schema"),
    "admin.col.vectors": ("ベクトル", "Vectors"),
    "admin.col.input": ("入力", "Input"),
    "admin.no_vectors": ("なし", "none"),
    "admin.needs_rebuild": ("要再構築", "needs a rebuild"),
    "admin.rebuild": ("再構築", "Rebuild"),
    "admin.embed": ("再埋め込み", "Re-embed"),
    "admin.model": ("モデル", "Model"),
    "admin.confirm.title": ("実行内容の確認", "What will happen"),
    "admin.confirm.rebuild": (
        "ソース「{source}」を {path} から新しい世代として作り直します（種類: {kind}）。",
        "Source “{source}” is rebuilt from {path} as a new generation (kind: {kind}).",
    ),
    "admin.confirm.embed": (
        "ソース「{source}」の文書をモデル {model} で埋め込み直します（既に計算済みの文はキャッシュを再利用）。",
        "The documents of “{source}” are embedded again with {model} (passages already computed come from the cache).",
    ),
    "admin.confirm.then_embed": (
        "その後、モデル {model} で埋め込みます（既に計算済みの文はキャッシュを再利用）。",
        "Then they are embedded with {model} (passages already computed come from the cache).",
    ),
    "admin.confirm.no_embed": (
        "ベクトルは作りません（前の世代にもありません）。",
        "No vectors are made (the current generation has none either).",
    ),
    "admin.confirm.serving": (
        "完成するまで現在の世代（{generation}、{docs}件）がそのまま応答し、完成した時点で切り替わります。失敗した場合は現在の世代が残ります。",
        "The current generation ({generation}, {docs} documents) keeps answering until the new one is complete, then it switches; if the build fails, the current one stays.",
    ),
    "admin.confirm.input_missing": (
        "入力 {path} が見つからないため実行できません。",
        "The input {path} is missing: this cannot run.",
    ),
    "admin.confirm.go": ("実行する", "Run it"),
    "admin.cancel": ("キャンセル", "Cancel"),
    "admin.job": ("ジョブ", "Job"),
    "admin.jobs": ("最近のジョブ", "Recent jobs"),
    "admin.job.running": ("実行中", "running"),
    "admin.job.done": ("完了", "done"),
    "admin.job.failed": ("失敗", "failed"),
    "admin.job.cancelled": ("中止", "cancelled"),
    "admin.job.cancel": ("中止する", "Cancel job"),
    "admin.job.cancelling": ("中止しています…", "Cancelling…"),
    "admin.rebuild.fetch": ("最新版を取得", "Fetch newer"),
    "admin.rebuild.fetch_hint": (
        "ダウンロード元から最新の入力を取得し（チェックサムで検証）、それから再構築します。",
        "Download the newest input from where it came from (checked against its checksum), "
        "then rebuild.",
    ),
    "admin.confirm.fetch": (
        "入力は {site} から取得し直します（前回: {last}）。新しい版がなければ再構築しません。",
        "The input is downloaded again from {site} (last time: {last}); without a newer one, "
        "nothing is rebuilt.",
    ),
    "admin.job.log": ("ログ", "Log"),
    "admin.job.eta": ("残り約 {s} 秒", "ETA {s} s"),
    "admin.job.elapsed": ("{s} 秒", "{s} s"),
    "admin.job.none": ("まだジョブはありません。", "No jobs yet."),
    "admin.notes": ("メモ（書き込める唯一のソース）", "Notes (the one writable source)"),
    "admin.notes.hint": (
        "メモは追加・編集・削除するとその場で反映されます。再構築はありません。",
        "Notes change in place when added, edited or forgotten: there is no rebuild.",
    ),
    "admin.notes.search": ("メモを検索", "Search the notes"),
    "admin.notes.range": ("{total}件中 {first}–{last}件目", "{first}–{last} of {total}"),
    "admin.notes.none": ("メモはまだありません。", "No notes yet."),
    "note.title": ("題名（省略時は1行目）", "Title (default: the first line)"),
    "note.text": ("内容", "Text"),
    "note.tags": ("タグ（カンマ区切り）", "Tags (comma-separated)"),
    "note.add": ("メモを追加", "Add note"),
    "note.edit": ("編集", "Edit"),
    "note.save": ("保存", "Save"),
    "note.forget": ("削除", "Forget"),
    "note.confirm_forget": (
        "メモ「{title}」を削除します。元に戻せません。",
        "Note “{title}” will be forgotten. This cannot be undone.",
    ),
    "admin.model_endpoint": ("言語モデルのエンドポイント", "Language model endpoint"),
    "admin.llm.off": (
        "未設定: 回答機能はオフです（検索は使えます）。CHIEZO_LLM_URL を設定してください。",
        "Not configured: answering is off (search works). Set CHIEZO_LLM_URL.",
    ),
    "admin.llm.ok": ("接続できます — モデル: {model}", "Reachable — model: {model}"),
    "admin.llm.bad": ("問題あり: {problem}", "Problem: {problem}"),
    "admin.llm.checking": ("確認中…", "Checking…"),
    "admin.llm.context": (
        "文脈長 {tokens} トークン／リクエスト（{source}）",
        "context {tokens} tokens a request ({source})",
    ),
    "admin.token": ("トークン", "Token"),
    "admin.token.hint": (
        "このサーバーへの書き込み（再構築・メモ）には CHIEZO_TOKEN が必要です。",
        "Writes to this server (rebuilds, notes) need CHIEZO_TOKEN.",
    ),
    "admin.token.save": ("このタブで使う", "Use in this tab"),
    "admin.writes_off": (
        "このサーバーはループバック以外で待ち受けていてトークンが未設定のため、書き込みはできません。",
        "This server listens beyond loopback with no token set: writes are disabled.",
    ),
    # disk (ops/maintenance.py, chiezo gc)
    "admin.disk": ("ディスク", "Disk"),
    "admin.disk.hint": (
        "現在の世代と直前の世代（ロールバック用）は削除しません。ビルド中のソースは飛ばします。",
        "The current generation and the previous one (kept for a rollback) are never deleted; "
        "a source being built is skipped.",
    ),
    "admin.disk.source": ("ソース", "Source"),
    "admin.disk.current": ("現在", "Current"),
    "admin.disk.previous": ("直前の世代", "Previous"),
    "admin.disk.other": ("古い世代・残骸", "Old generations, debris"),
    "admin.disk.busy": ("ビルド中", "being built"),
    "admin.disk.caches": ("キャッシュ", "Caches"),
    "admin.disk.file": ("ファイル", "File"),
    "admin.disk.size": ("サイズ", "Size"),
    "admin.disk.note": ("状態", "State"),
    "admin.disk.leftovers": (
        "ソースではないフォルダー {n}件（{size}）: 止まったビルド・取り込み・削除の残り",
        "{n} folders that are no source ({size}): left by builds, imports or removals",
    ),
    "admin.disk.downloads": (
        "どの世代にも使われていないダウンロード {n}件（{size}）: 手で削除してください",
        "{n} downloads no kept generation uses ({size}): delete them by hand",
    ),
    "admin.disk.reclaimable": ("回収できる容量: {size}", "Reclaimable: {size}"),
    "admin.disk.with_caches": (
        "使われていないキャッシュも削除（作り直しに時間がかかります）",
        "Also delete unused caches (they take time to make again)",
    ),
    "admin.disk.reclaim": ("容量を回収", "Reclaim space"),
    "admin.disk.confirm": (
        "古い世代と残骸を削除します（現在と直前の世代は残ります）。よろしいですか？",
        "Old generations and debris will be deleted (the current and previous generations "
        "stay). Go ahead?",
    ),
    "admin.disk.done": ("{size} を回収しました", "Reclaimed {size}"),
    "admin.disk.state.used": ("{sources} が使っています", "used by {sources}"),
    "admin.disk.state.unused": ("どのソースも使っていないモデル", "no source uses this model"),
    "admin.disk.state.open": ("埋め込みの実行中", "open: an embed is running"),
    "admin.disk.state.legacy": (
        "旧形式: 回収すると変換されて約4分の1に",
        "old layout: reclaiming converts it to about a quarter",
    ),
    "admin.disk.state.building": ("止まった変換の残り", "left by a conversion that stopped"),
    "admin.disk.state.legacy_later": (
        "旧形式: 次にこのモデルで埋め込むときに変換されます",
        "old layout: converted the next time this model embeds",
    ),
    "admin.disk.state.leftover": (
        "変換済みの旧形式ファイル（もう読まれません）",
        "old layout, already converted: nothing reads it",
    ),
    "admin.disk.state.documents": (
        "変換済み文書（{days}日使われていない項目は削除できます）",
        "converted documents (entries unused for {days} days can go)",
    ),
    "admin.disk.state.live": (
        "ライブソースのキャッシュ（サーバーの回答。必要なら再取得）",
        "a live source's cache (its server's answers, asked again when needed)",
    ),
    "admin.disk.skipped": ("飛ばしたもの: {what}", "Skipped: {what}"),
    # chat
    "chat.title": ("チャット", "Chat"),
    "chat.placeholder": (
        "質問を入力（例: 夏目漱石はいつ生まれましたか？）",
        "Ask a question (e.g. When was Natsume Soseki born?)",
    ),
    "chat.send": ("送信", "Send"),
    "chat.you": ("あなた", "You"),
    "chat.mode": ("方式", "Mode"),
    "chat.mode.rag": ("検索して回答 (RAG)", "Search then answer (RAG)"),
    "chat.mode.agent": ("エージェント（モデルが道具を使う）", "Agent (the model uses the tools)"),
    "chat.grounded": ("出典の範囲だけで答える", "Answer only from the sources"),
    "chat.sources": ("出典", "Sources"),
    "chat.step": ("手順 {step}: {tool}", "Step {step}: {tool}"),
    "chat.searching": ("調べています…", "Looking it up…"),
    "chat.uncited": ("この回答は出典を引用していません。", "This answer cites no source."),
    "chat.doubt.unsupported": (
        "引用した出典に裏付けがありません",
        "Its cited sources do not support this",
    ),
    "chat.doubt.uncited": ("出典が示されていません", "This cites no source"),
    "chat.doubts": (
        "{count} 文が出典で確かめられません（印の付いた文）。",
        "{count} sentence(s) could not be checked against the sources (marked).",
    ),
    "chat.ungrounded": (
        "出典外の知識も使ってよい回答です。",
        "This answer may go beyond the sources.",
    ),
    "chat.off": (
        "回答機能はオフです（言語モデルのエンドポイントが設定されていません）。検索はそのまま使えます:",
        "The answer layer is off (no language model endpoint is configured). Search works as always:",
    ),
    "chat.off_hint": (
        "CHIEZO_LLM_URL と CHIEZO_LLM_MODEL を設定してサーバーを起動し直すと回答できます。",
        "Set CHIEZO_LLM_URL and CHIEZO_LLM_MODEL and restart the server to get answers.",
    ),
    "chat.model_unknown": ("言語モデル", "Language model"),
    "chat.error": ("エラー: {error}", "Error: {error}"),
    # why an answer failed (the error's `cause`), then the server's own words
    "chat.cause.context_exceeded": (
        "質問と出典がモデルの文脈長（コンテキスト）に収まりません",
        "The question and its sources do not fit the model's context window",
    ),
    "chat.cause.timeout": (
        "モデルが時間内に答え終えませんでした",
        "The model did not finish in time",
    ),
    "chat.cause.model_missing": (
        "エンドポイントに設定されたモデルがありません",
        "The endpoint does not have the configured model",
    ),
    "chat.cause.unreachable": (
        "言語モデルのエンドポイントにつながりません",
        "The language model endpoint cannot be reached",
    ),
    "chat.cause.failed": (
        "言語モデルのエンドポイントがエラーを返しました",
        "The language model endpoint failed",
    ),
    "chat.cause.bad_reply": (
        "エンドポイントの応答がチャット補完の形式ではありません",
        "The endpoint's reply is not a chat completion",
    ),
    "chat.cause.first_token": (
        "モデルが時間内に回答を始めませんでした",
        "The model did not begin the answer in time",
    ),
    "chat.library_says": ("ライブラリの記述", "What the library says"),
    "chat.cause.cut_short": (
        "モデルの回答が途中で途切れました",
        "The model's answer stopped midway",
    ),
    "chat.context_sizes": (
        "要求 {prompt} トークン／文脈長 {context} トークン",
        "the request took {prompt} tokens; the context holds {context}",
    ),
    "chat.timeout_after": (
        "{seconds} 秒で打ち切り（{setting}）",
        "stopped after {seconds} s ({setting})",
    ),
    "chat.models_there": ("エンドポイントにあるモデル: {models}", "Models there: {models}"),
    "chat.context": ("文脈長 {tokens} トークン", "context {tokens} tokens"),
    "chat.new": ("新しい会話", "New conversation"),
    "chat.stages": ("処理の内訳（計 {seconds} 秒）", "Stages ({seconds} s in all)"),
    "chat.stage_line": (
        "{stage} · {name} · {seconds} 秒 · 入力 {tokens_in} / 出力 {tokens_out} トークン",
        "{stage} · {name} · {seconds} s · {tokens_in} tokens in / {tokens_out} out",
    ),
    # the current location ("use my location": core/here.py), in the search and chat pages
    "here.use": ("現在地を使う", "Use my location"),
    "here.why": (
        "押したときだけブラウザに現在地を尋ねます。位置はこのページの中だけに置かれ、"
        "{minutes}分で消えます（保存も記録もしません）。",
        "Asks the browser for your location only when pressed; it stays in this page only "
        "and is dropped after {minutes} min (never stored or logged).",
    ),
    "here.attached": ("現在地を添付中 · 残り {left}", "location attached · expires in {left}"),
    "here.locating": ("現在地を取得しています…", "Finding your location…"),
    "here.expired": (
        "現在地の期限が切れました。使うには「現在地を使う」をもう一度押してください。",
        'Your location has expired: press "Use my location" again to use it.',
    ),
    "here.needed": (
        "現在地が分かりません。「現在地を使う」を押してから、もう一度探してください。",
        'Your location is not known: press "Use my location", then search again.',
    ),
    "here.insecure": (
        "現在地は安全な接続（https、またはこのマシン自身の localhost）で開いたページでだけ使えます",
        "Your location can be used only on a page opened securely (https, or localhost on "
        "this machine)",
    ),
    "here.unsupported": (
        "このブラウザは現在地を取得できません",
        "This browser cannot tell its location",
    ),
    "here.denied": (
        "位置情報の使用が許可されていません（ブラウザのサイト設定で許可できます）",
        "Location permission was refused (the browser's site settings can allow it)",
    ),
    "here.failed": (
        "現在地を取得できませんでした: {reason}",
        "Could not get your location: {reason}",
    ),
}


def pick_language(request: Request) -> str:
    asked = request.query_params.get("lang")
    if asked in LANGUAGES:
        return asked
    remembered = request.cookies.get(COOKIE)
    if remembered in LANGUAGES:
        return remembered
    return from_accept_language(request.headers.get("accept-language", ""))


def from_accept_language(header: str) -> str:
    """The supported language the browser ranks highest (``en-US,en;q=0.9,ja;q=0.8`` → en)."""
    ranked = []
    for position, part in enumerate(header.split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        base = tag.strip().lower().split("-")[0]
        if base in LANGUAGES and quality > 0:
            ranked.append((-quality, position, base))
    return min(ranked)[2] if ranked else DEFAULT


class Translator:
    """``t("results.count", total=3)`` in the request's language."""

    def __init__(self, language: str):
        self.language = language
        self._index = LANGUAGES.index(language)

    def __call__(self, name: str, **values: object) -> str:
        text = MESSAGES[name][self._index]
        return text.format(**values) if values else text

    def catalog(self, prefixes: tuple[str, ...] = ()) -> dict[str, str]:
        """The messages whose names start with one of ``prefixes``, for a page's script."""
        return {
            name: pair[self._index] for name, pair in MESSAGES.items() if name.startswith(prefixes)
        }
