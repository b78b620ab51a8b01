"""The web page in a real headless Chromium against a real uvicorn server.

Skipped when Debian's ``/usr/bin/chromium`` (``apt-get install chromium``) or
the Playwright package is missing, so the suite passes on machines without a
browser. A screenshot of the page with results and the table of contents is
kept at ``/tmp/hiera-web.png`` for people to look at.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest
from fastapi import FastAPI

CHROMIUM, CHROMIUM_ARGS = helpers.CHROMIUM, helpers.CHROMIUM_ARGS
SCREENSHOT_COPY = Path("/tmp/hiera-web.png")

# Checked at collection time: a fixture-level skip would come after the session fixtures built the collection.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"{CHROMIUM} not found: install Debian's chromium (apt-get install chromium) to run browser tests",
    ),
]


@pytest.fixture(scope="module")
def server_url(app: FastAPI) -> Iterator[str]:
    """uvicorn on 127.0.0.1 and a port the OS picks, in a background thread."""
    with helpers.running_server(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def test_search_results_and_table_of_contents(browser, server_url: str, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_default_timeout(15_000)
    page.goto(server_url)
    page.wait_for_selector("body[data-ready='1']")

    # controls are built from /methods; lam and top_docs show for dhr only
    options = page.eval_on_selector_all("#retriever option", "os => os.map(o => o.value)")
    assert "dhr" in options and "bm25" in options
    assert page.input_value("#retriever") == "dhr"
    assert page.is_visible("[data-param='lam']") and page.is_visible("[data-param='top_docs']")
    assert "5 documents" in page.text_content("#collection")
    page.select_option("#retriever", "bm25")
    assert not page.is_visible("[data-param='lam']")
    page.select_option("#retriever", "dhr")
    assert page.is_visible("[data-param='lam']")

    # a question: results grouped by document, each passage with its breadcrumb
    page.select_option("#k", "5")
    page.fill("#q", "What do worker bees do in the hive?")
    page.click("#search-btn")
    page.wait_for_selector(".doc-group")
    groups = page.locator(".doc-group")
    assert groups.count() >= 1
    titles = page.eval_on_selector_all(".doc-group .doc-title", "ts => ts.map(t => t.textContent)")
    assert titles[0] == "Honey bee"
    assert len(titles) == len(set(titles)), "one group per document"
    first = groups.nth(0)
    crumbs = first.locator(".breadcrumb").all_text_contents()
    assert "Honey bee › Colony › Workers" in [" ".join(c.split()) for c in crumbs]
    marks = [m.lower() for m in first.locator(".hit-text mark").all_text_contents()]
    assert "worker" in marks and "bees" in marks and "what" not in marks
    assert first.locator(".bar-doc").count() >= 1 and first.locator(".bar-passage").count() >= 1
    assert "passage" in first.locator(".reason").first.text_content()
    timings = page.text_content("#timings")
    assert "doc-stage" in timings and "passage-stage" in timings and "ms" in timings
    assert page.is_hidden("#error")
    assert "q=What+do+worker" in page.url  # the search can be shared as a link

    # the document's table of contents, with the hit's section highlighted
    first.locator(".doc-title").click()
    page.wait_for_selector("#toc .toc-item.hit")
    assert page.is_visible("#toc")
    assert page.text_content("#panel-title") == "Honey bee"
    toc = page.locator("#toc .toc-item").all_text_contents()
    assert any(t.startswith("Workers") for t in toc) and any(t.startswith("Drones") for t in toc)
    hit_items = [t.strip() for t in page.locator("#toc .toc-item.hit").all_text_contents()]
    assert any(t.startswith("Workers") for t in hit_items)
    assert page.text_content("#toc .toc-item.best").startswith("Workers")
    assert page.locator("#toc .toc-item:not(.hit)").count() >= 1
    # the panel opens on the best hit's section, that passage marked
    assert page.text_content("#section-view .section-title") == "Honey bee › Colony › Workers"
    assert "Worker bees are sterile" in page.text_content("#section-view .passage.hit")
    shot = tmp_path / "hiera-web.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    shutil.copyfile(shot, SCREENSHOT_COPY)

    # an API error is shown in the message area (the page cannot produce one, so add a bad k)
    page.evaluate("""() => { const o = document.createElement('option'); o.value = o.text = '5000';
                             document.querySelector('#k').appendChild(o); document.querySelector('#k').value = '5000'; }""")
    page.click("#search-btn")
    page.wait_for_selector("#error:not([hidden])")
    err = page.text_content("#error")
    assert err.startswith("k") and "1000" in err and "422" in err, err  # one line naming k and its bound
    page.select_option("#k", "10")
    page.fill("#q", "   ")
    page.click("#search-btn")
    assert "Type a question" in page.text_content("#error")

    # markup in passages is shown as text, never run; ids with a slash open too
    page.fill("#q", "fans write script and bold tags about AC/DC rock music")
    page.click("#search-btn")
    page.wait_for_selector(".doc-group[data-doc-id='AC/DC']")
    assert page.is_hidden("#error")
    assert page.locator(".doc-group").count() >= 2  # ten hits from several documents, one group each
    for group in page.locator(".doc-group").all():
        title = group.locator(".doc-title").text_content()
        assert all(c.split(" › ")[0].removesuffix(" (lead)") == title for c in group.locator(".breadcrumb").all_text_contents())
    texts = page.locator(".doc-group[data-doc-id='AC/DC'] .hit-text").all_text_contents()
    assert any("<script>alert('x')</script>" in t and "<b>bold</b>" in t for t in texts)
    assert page.locator("#results script, #results b").count() == 0
    page.locator(".doc-group[data-doc-id='AC/DC'] .doc-title").click()
    page.wait_for_function("document.querySelector('#panel-title').textContent === 'AC/DC'")
    frag = page.evaluate(
        """() => { const d = document.createElement('div');
                   d.appendChild(window.hieraUI.highlight('<img src=x onerror=alert(1)> Bees & honey', ['bees']));
                   return [d.querySelectorAll('img').length, d.querySelectorAll('mark').length, d.textContent]; }"""
    )
    assert frag == [0, 1, "<img src=x onerror=alert(1)> Bees & honey"]

    # a narrow screen still shows the search box and results
    page.set_viewport_size({"width": 420, "height": 800})
    assert page.is_visible("#q") and page.is_visible("#search-btn")
    # the browser logs the 422 provoked above; anything else is a bug in the page
    assert [e for e in errors if "status of 422" not in e] == [], errors
    page.close()
    print(f"browser test body took {time.perf_counter() - t0:.1f} s")


# -- method controls built from the registry ----------------------------------------------


def _open(browser, url: str) -> tuple[object, list[str]]:
    """A page on ``url`` once its controls are built, and the errors it logs."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_default_timeout(15_000)
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    return page, errors


def _methods(page, server_url: str) -> dict[str, dict]:
    """The retrieval methods of /methods (readers, ``kind: reader``, have their own walk in tests/read)."""
    resp = page.request.get(server_url + "methods")
    assert resp.ok, f"GET /methods: HTTP {resp.status}"
    return {m["name"]: m for m in resp.json() if m.get("kind", "retriever") == "retriever"}


def _built_kinds(methods: dict[str, dict]) -> set[str]:
    return {kind for m in methods.values() if m["available"] for kind in m["requires"]}


def _as_text(value: object) -> str:
    """How a control shows a JSON value (JavaScript's String())."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def _other_value(p: dict, built: set[str], declared: object) -> object:
    """A valid value other than the default (the first other choice, or the default ± one step).

    ``p["default"]`` is this collection's effective default; ``declared`` is the
    registry's, which may stand for it (doc_stage ``auto`` resolves to the
    stage the build allows), so neither counts as another choice.
    """
    if p["choices"]:
        needs = p.get("choice_requires") or {}
        return next(
            c for c in p["choices"] if c not in (p["default"], declared) and set(needs.get(c, ())) <= built
        )
    if p["type"] == "bool":
        return not p["default"]
    if p["type"] in ("path", "url"):
        import helpers

        return str(helpers.PATH_VALUES[p["name"]]())  # a directory that loads (helpers.PATH_VALUES)
    if p["type"] in ("int", "float") and p["default"] is None:  # unset: a value inside the bounds
        mid = ((p["min"] or 0) + (p["max"] if p["max"] is not None else 2)) / 2
        return int(mid) if p["type"] == "int" else round(mid, 10)
    if p["type"] in ("int", "float"):
        step = 1 if p["type"] == "int" else 0.05
        value = p["default"] + step
        if p["max"] is not None and value > p["max"]:
            value = p["default"] - step
        assert p["min"] is None or value >= p["min"], p
        return value if p["type"] == "int" else round(value, 10)
    if p["type"] == "str" and p["default"] is None:  # unset, with a syntax of its own (helpers.STR_VALUES)
        import helpers

        return helpers.STR_VALUES[p["name"]]
    return p["default"]  # str/path: no other value is known to be valid; still checked as sent and effective


def _set_control(page, p: dict, value: object) -> None:
    sel = f"#method-params [data-param='{p['name']}']"
    if p["choices"]:
        page.select_option(sel, str(value))
    elif p["type"] == "bool":
        page.set_checked(sel, bool(value))
    else:
        page.fill(sel, _as_text(value))


def _same(a: object, b: object, ptype: str) -> bool:
    if ptype == "float":
        return a is not None and b is not None and abs(float(a) - float(b)) < 1e-9
    return a == b


def test_every_method_param_reaches_the_server(browser, server_url: str) -> None:
    """Walk :data:`hiera.spec.METHODS`: each parameter's control is sent under its name and takes effect."""
    from urllib.parse import parse_qs, urlsplit

    from hiera.spec import METHODS

    page, errors = _open(browser, server_url)
    methods = _methods(page, server_url)
    assert list(methods) == list(METHODS), "/methods lists the registry, in its order"
    built = _built_kinds(methods)
    assert {"bm25", "dense"} <= built, "the test collection builds both index kinds"
    offered = page.eval_on_selector_all("#retriever option:not([disabled])", "os => os.map(o => o.value)")
    served = [name for name in METHODS if methods[name]["available"]]
    assert offered == served
    page.fill("#q", "What do worker bees do in the hive?")
    page.select_option("#k", "5")
    checked = 0
    for name, spec in METHODS.items():
        if not methods[name]["available"]:
            continue
        assert [p["name"] for p in methods[name]["params"]] == [p.name for p in spec.params]
        # server-side parameters (directories) get no control and are never sent: `hiera build --set` sets them
        declared = [p for p in methods[name]["params"] if p["http"]]
        page.select_option("#retriever", name)
        # one labelled control per parameter, prefilled with this collection's default, help as tooltip
        controls = page.eval_on_selector_all(
            "#method-params [data-param]",
            "cs => cs.map(c => [c.dataset.param, c.type === 'checkbox' ? String(c.checked) : c.value, c.title,"
            " c.closest('label') !== null])",
        )
        assert [c[0] for c in controls] == [p["name"] for p in declared], name
        for (pname, shown, title, labelled), p in zip(controls, declared, strict=True):
            assert shown == _as_text(p["default"]), (name, pname, shown, p["default"])
            assert p["help"] in title and labelled, (name, pname)
        disabled = page.eval_on_selector_all("#level option", "os => os.filter(o => o.disabled).map(o => o.value)")
        assert sorted(disabled) == sorted({"passage", "doc"} - set(spec.levels)), name
        assert page.input_value("#level") in spec.levels

        # no parameters (bm25-doc): one search still carries none
        todo = declared or [None]
        for p in todo:
            page.select_option("#retriever", name)  # fresh controls: every other parameter at its default
            value = None if p is None else _other_value(p, built, spec.param(p["name"]).default)
            if p is not None:
                _set_control(page, p, value)
            with page.expect_request(lambda r: "/search?" in r.url) as req_info:
                page.click("#search-btn")
            request = req_info.value
            sent = parse_qs(urlsplit(request.url).query)
            assert sent["retriever"] == [name]
            method_keys = set(sent) - {"q", "k", "level", "retriever", "rerank"}
            # an unset parameter (default null: an empty control) is left out, so the server uses its default
            expected = {d["name"] for d in declared if d["default"] is not None} | ({p["name"]} if p else set())
            assert method_keys == expected, (name, sent)
            response = request.response()
            assert response is not None
            body = response.json()
            assert response.ok, (name, p and p["name"], body)
            assert body["retriever"] == name and body["ignored"] == [], (name, body.get("ignored"))
            if p is not None:
                assert sent[p["name"]] == [_as_text(value)], (name, p["name"], sent)
                assert _same(body["params"].get(p["name"]), value, p["type"]), (name, p["name"], body["params"])
                checked += 1
            page.wait_for_function(
                "n => !document.querySelector('#search-btn').disabled"
                " && document.querySelector('#timings .t-label')?.textContent.includes(' · ' + n + ' · ')",
                arg=name,
            )
    assert checked == sum(len([p for p in s.params if p.http]) for n, s in METHODS.items() if methods[n]["available"])

    # a value out of bounds: the server's one-line message names the parameter
    page.select_option("#retriever", "dhr")
    lam = next(p for p in methods["dhr"]["params"] if p["name"] == "lam")
    page.fill("#method-params [data-param='lam']", _as_text(lam["max"] + 1))
    page.click("#search-btn")
    page.wait_for_selector("#error:not([hidden])")
    assert "lam" in page.text_content("#error") and "422" in page.text_content("#error")
    assert [e for e in errors if "status of 422" not in e] == [], errors
    page.close()


def test_link_restores_method_and_params(browser, server_url: str) -> None:
    """A shared link sets the method, level and parameters (canonical names or aliases) and searches."""
    from urllib.parse import parse_qs, urlsplit

    url = server_url + "?q=volcano+lava&retriever=dhr&k=5&level=doc&lambda=2.5&top_docs=7&doc_stage=bm25"
    page = browser.new_page()
    page.set_default_timeout(15_000)
    with page.expect_request(lambda r: "/search?" in r.url) as req_info:
        page.goto(url)
    page.wait_for_selector(".doc-group")
    assert page.input_value("#retriever") == "dhr" and page.input_value("#level") == "doc"
    assert page.input_value("[data-param='lam']") == "2.5"
    assert page.input_value("[data-param='top_docs']") == "7"
    assert page.input_value("[data-param='doc_stage']") == "bm25"
    sent = parse_qs(urlsplit(req_info.value.url).query)
    assert sent["lam"] == ["2.5"] and "lambda" not in sent and sent["top_docs"] == ["7"]
    body = req_info.value.response().json()
    assert body["params"]["lam"] == 2.5 and body["params"]["top_docs"] == 7 and body["params"]["doc_stage"] == "bm25"
    assert "lam=2.5" in page.url  # the page rewrites the link with canonical names

    # a document-only method: the passage level is disabled and the level falls back
    page.select_option("#retriever", "bm25-doc")
    assert page.input_value("#level") == "doc"
    assert page.eval_on_selector("#level option[value='passage']", "o => o.disabled")
    assert page.locator("#method-params [data-param]").count() == 0
    page.close()


def test_controls_follow_methods_json(browser, server_url: str) -> None:
    """Controls come from /methods alone: an unbuilt method is not offered, and every type has its control."""
    import json

    page = browser.new_page()
    page.set_default_timeout(15_000)
    real = page.request.get(server_url + "methods").json()
    fake = json.loads(json.dumps(real))
    dhr_names = {p["name"] for m in real if m["name"] == "dhr" for p in m["params"]}
    # a real parameter of another method, which the server ignores for dhr and reports back
    foreign = next(p for m in real for p in m["params"] if p["name"] not in dhr_names)
    for m in fake:
        if m["name"] == "hybrid":
            m["available"], m["missing"] = False, ["bm25"]
        if m["name"] == "dhr":
            m["params"] += [
                foreign,
                {"name": "x_flag", "type": "bool", "default": False, "help": "a <b>flag</b>", "min": None,
                 "max": None, "choices": None, "aliases": [], "tunable": False},
                {"name": "x_note", "type": "str", "default": "plain", "help": "free text", "min": None,
                 "max": None, "choices": None, "aliases": [], "tunable": False},
                {"name": "x_ratio", "type": "float", "default": 0.25, "help": "a ratio", "min": 0.0,
                 "max": 1.0, "choices": None, "aliases": [], "tunable": True},
            ]
    page.route("**/methods", lambda route: route.fulfill(json=fake))
    page.goto(server_url)
    page.wait_for_selector("body[data-ready='1']")
    hybrid = page.locator("#retriever option[value='hybrid']")
    assert hybrid.is_disabled() and "bm25" in hybrid.text_content()
    # a document stage that needs the missing index cannot be chosen
    stages = page.eval_on_selector_all(
        "[data-param='doc_stage'] option", "os => Object.fromEntries(os.map(o => [o.value, o.disabled]))"
    )
    assert stages["bm25"] and stages["hybrid-max"] and not stages["summary"] and not stages["auto"]
    assert page.get_attribute("[data-param='x_flag']", "type") == "checkbox"
    assert page.get_attribute("[data-param='x_note']", "type") == "text"
    ratio = page.locator("[data-param='x_ratio']")
    assert ratio.get_attribute("type") == "number" and ratio.get_attribute("min") == "0"
    assert ratio.get_attribute("max") == "1" and ratio.get_attribute("step") in ("any", "0.05")
    assert ratio.input_value() == "0.25"
    assert page.get_attribute("[data-param='x_flag']", "title").startswith("a <b>flag</b>")  # text, not markup
    assert page.locator("#method-params b").count() == 0
    page.set_checked("[data-param='x_flag']", True)
    page.fill("[data-param='x_note']", "hello")
    page.fill("#q", "honey bees")
    from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

    asked: list[str] = []

    def without_fakes(route) -> None:  # the server refuses names it does not declare: the made-up ones stop here
        asked.append(route.request.url)
        parts = urlsplit(route.request.url)
        kept = [(n, v) for n, v in parse_qsl(parts.query) if not n.startswith("x_")]
        route.continue_(url=parts._replace(query=urlencode(kept)).geturl())

    page.route("**/search?*", without_fakes)
    with page.expect_request(lambda r: "/search?" in r.url) as req_info:
        page.click("#search-btn")

    sent = parse_qs(urlsplit(asked[0]).query)
    assert sent["x_flag"] == ["true"] and sent["x_note"] == ["hello"] and sent["x_ratio"] == ["0.25"]
    page.wait_for_selector(".doc-group")
    assert sent[foreign["name"]] == [_as_text(foreign["default"])]
    body = req_info.value.response().json()
    assert body["ignored"] == [foreign["name"]], body["ignored"]
    note = page.locator("#timings .chip-note")
    assert note.is_visible() and foreign["name"] in note.text_content()
    page.close()


# -- an API key -----------------------------------------------------------------------------------
def test_api_key_from_a_link_or_a_prompt(browser, collection_dir: Path) -> None:
    """With a key required, the page takes it from ``?key=`` (and drops it from the address bar) or asks for it."""
    from hiera.serve import create_app

    key = "browser-test-key"
    app = create_app(collection_dir, warmup=False, api_key=key)
    with helpers.running_server(app) as url:
        for how in ("link", "prompt"):
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.set_default_timeout(15_000)
            prompts: list[str] = []
            page.on("dialog", lambda d, seen=prompts: (seen.append(d.message), d.accept(key)))
            query = "?retriever=bm25&q=worker+bees" + (f"&key={key}" if how == "link" else "")
            page.goto(url + query)
            page.wait_for_selector(".doc-group")
            assert "key=" not in page.url  # never left in the address bar or a shared link
            assert page.locator(".doc-group").count() >= 1
            assert prompts == ([] if how == "link" else ["This hiera server needs an API key:"])
            page.close()


def test_set_answer_shows_the_expression_and_each_members_evidence(browser, server_url: str) -> None:
    """The sets method: the parsed expression on top, then the members with a sentence per constraint."""
    page, errors = _open(browser, server_url)
    page.select_option("#retriever", "sets")
    assert page.input_value("#level") == "doc"
    page.fill("#q", "Honey bees or planets of the Solar System")
    page.click("#search-btn")
    page.wait_for_selector(".set-answer .set-expr")
    assert "∪" in page.text_content(".set-expr")
    assert "template _ or _" in page.text_content(".set-info")
    members = page.locator(".set-member")
    assert members.count() >= 1 and page.locator(".doc-group").count() == 0
    first = members.nth(0)
    rows = first.locator(".set-support li")
    assert rows.count() == 2  # one row per constraint, each with its probability
    sentences = first.locator(".set-sentence").all_text_contents()
    assert sentences and all(s.strip() for s in sentences)
    assert page.locator(".set-answer script, .set-answer b").count() == 0
    first.locator(".doc-title").click()
    page.wait_for_function("document.querySelector('#panel-title').textContent.length > 0")
    assert [e for e in errors if "status of 422" not in e] == [], errors
    page.close()


def test_fetchhr_hits_say_which_layer_fetched_them(browser, server_url: str) -> None:
    """FetchHR: every hit carries a badge naming the encoder layer whose query found it."""
    page, errors = _open(browser, server_url)
    page.select_option("#retriever", "fetchhr")
    page.select_option("#k", "10")
    page.fill("#method-params [data-param='layers']", "1,6")
    page.fill("#q", "What do worker bees do in the hive?")
    page.click("#search-btn")
    page.wait_for_selector(".hit .chip-layer")
    badges = page.locator(".hit .chip-layer").all_text_contents()
    assert len(badges) == page.locator(".hit").count() == 10
    assert sorted(set(badges)) == ["fetched by layer 1", "fetched by layer 6"]
    # one ranked list: ranks in order, and each hit's bar for its layer's own score beside the final one
    assert page.locator(".hit .rank").all_text_contents() == [f"#{i}" for i in range(1, 11)]
    for hit, badge in zip(page.locator(".hit").all(), badges, strict=True):
        layer = "layer" + badge.rsplit(" ", 1)[1]
        assert hit.locator(f".bar-{layer} .bar-label").text_content() == layer
        assert hit.locator(".bar-final").count() == 1
    assert [e for e in errors if "status of 422" not in e] == [], errors
    page.close()


def test_linking_shows_how_this_was_found(browser, server_url: str) -> None:
    """linking: a collapsed "how this was found" panel with one branch per trace step, mentions and linked titles."""
    page, errors = _open(browser, server_url)
    page.select_option("#retriever", "linking")
    page.fill("#q", "What do worker bees do in the Honey bee colony?")
    page.click("#search-btn")
    page.wait_for_selector("#explain:not([hidden]) .explain-step", state="attached")
    assert page.text_content("#explain > summary") == "how this was found"
    assert not page.eval_on_selector("#explain", "d => d.open")  # collapsed until asked
    steps = page.eval_on_selector_all("#explain-steps > .explain-step", "ls => ls.map(l => l.dataset.step)")
    assert steps == ["encode-query", "mentions", "entity-linking", "event-linking", "decomposition",
                     "decomposition-linking", "linked-documents", "coarse-filter", "rerank", "coverage", "answered-by"]
    page.click("#explain > summary")
    page.click(".explain-step[data-step='linked-documents'] > details > summary")
    page.click(".explain-step[data-step='linked-documents'] details details > summary")  # the "linked" list
    linked = page.locator(".explain-step[data-step='linked-documents'] .explain-item").all_text_contents()
    assert any("title: Honey bee" in t for t in linked), linked
    assert any("source: " in t for t in linked), linked
    page.click(".explain-step[data-step='mentions'] > details > summary")
    page.click(".explain-step[data-step='mentions'] details details > summary")
    mentions = page.locator(".explain-step[data-step='mentions'] .explain-item").all_text_contents()
    assert any("text: Honey bee" in t and "span: [" in t for t in mentions), mentions
    assert page.locator("#explain script, #explain b").count() == 0  # text only
    # a method without a trace detail still lists its steps; a failed search leaves no stale panel behind
    assert [e for e in errors if "status of 422" not in e] == [], errors
    page.close()


def test_a_filter_from_a_link_or_the_field(browser, server_url: str) -> None:
    """The filter field travels in the link and to /search; a bad filter is the server's one line, shown."""
    from urllib.parse import parse_qs, urlsplit

    page = browser.new_page()
    page.set_default_timeout(15_000)
    with page.expect_request(lambda r: "/search?" in r.url) as req_info:
        page.goto(server_url + "?q=planets+and+bees&retriever=bm25&k=5&filter=id+%3D+honey_bee")
    page.wait_for_selector(".doc-group")
    assert page.input_value("#filter") == "id = honey_bee"
    assert parse_qs(urlsplit(req_info.value.url).query)["filter"] == ["id = honey_bee"]
    assert {h["doc_id"] for h in req_info.value.response().json()["hits"]} == {"honey_bee"}
    page.fill("#filter", "colour = red")
    page.click("#search-btn")
    page.wait_for_function("document.querySelector('#error').textContent.includes('unknown field')")
    assert "filter=colour" in page.url
    page.close()
