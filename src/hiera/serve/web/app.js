/* hiera web page: plain DOM, no build step, no network beyond this server.
 *
 * Every piece of text from the API goes into the page through textContent or
 * text nodes, never innerHTML, so a passage containing markup shows as text.
 */
"use strict";

(function () {
  const $ = (sel) => document.querySelector(sel);
  // Longer function words that would light up half of every passage. Words of
  // one or two characters are skipped anyway.
  const STOP = new Set(("the and for are was were what which who whom whose when where why how that this these " +
    "those with from into onto than then there their they them does did has have had not but you your its " +
    "can could would should will shall may might been being about after before over under between during").split(" "));
  const WORD = /([\p{L}\p{N}]+)/u;

  // Fixed controls; everything else in the form is a method parameter built from /methods.
  const FIXED = new Set(["q", "k", "level", "retriever", "rerank", "answer"]);

  const state = {
    health: null, methods: [], readers: [], missingKinds: new Set(),
    seq: 0, results: null, hitPaths: new Map(), terms: [], openDoc: null,
  };

  // -- small helpers ---------------------------------------------------------
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function showError(msg) {
    const box = $("#error");
    box.textContent = msg;
    box.hidden = !msg;
  }

  // -- API key: only when the server asks for one (401) ----------------------
  // Taken once from a ?key= link (then dropped from the address bar, so that a
  // shared link does not carry it) or asked for; kept for this tab only, and
  // sent as a header, never in a URL.
  const KEY_STORE = "hiera-api-key";
  let memoryKey = "";

  function apiKey() {
    try { return sessionStorage.getItem(KEY_STORE) || memoryKey; } catch (e) { return memoryKey; }
  }

  function setApiKey(k) {
    memoryKey = k;
    try { sessionStorage.setItem(KEY_STORE, k); } catch (e) { /* storage disabled: keep it in memory */ }
  }

  function takeKeyFromUrl() {
    const url = new URL(location.href);
    if (!url.searchParams.has("key")) return;
    setApiKey(url.searchParams.get("key"));
    url.searchParams.delete("key");
    history.replaceState(null, "", url.pathname + (url.searchParams.toString() ? "?" + url.searchParams : "") + url.hash);
  }

  function apiHeaders() {
    const h = { Accept: "application/json" };
    const k = apiKey();
    if (k) h.Authorization = "Bearer " + k;
    return h;
  }

  async function apiFetch(url) {
    let resp = await fetch(url, { headers: apiHeaders() });
    if (resp.status === 401) {
      const k = window.prompt("This hiera server needs an API key:");
      if (k && k.trim()) {
        setApiKey(k.trim());
        resp = await fetch(url, { headers: apiHeaders() });
      }
    }
    return resp;
  }

  async function getJSON(url) {
    let resp;
    try {
      resp = await apiFetch(url);
    } catch (e) {
      throw new Error("cannot reach the server (" + e.message + ")");
    }
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      const detail = body && body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : resp.statusText;
      const err = new Error(detail + " (HTTP " + resp.status + ")");
      err.status = resp.status;
      throw err;
    }
    return body;
  }

  // -- highlighting ----------------------------------------------------------
  function queryTerms(q) {
    const out = [];
    for (const w of String(q).toLowerCase().split(WORD)) {
      const keep = w.length > 2 || /^\p{N}+$/u.test(w); // "50" matters, "of" does not
      if (WORD.test(w) && keep && !STOP.has(w) && !out.includes(w)) out.push(w);
    }
    return out;
  }

  function matches(word, terms) {
    const w = word.toLowerCase();
    for (const t of terms) {
      if (w === t) return true;
      // cheap plural/verb-form match: "teams" for "team", "played" for "play"
      if (t.length >= 4 && w.startsWith(t) && w.length - t.length <= 3) return true;
      if (w.length >= 4 && t.startsWith(w) && t.length - w.length <= 3) return true;
    }
    return false;
  }

  /* A fragment with `text` as text nodes and matched words wrapped in <mark>. */
  function highlight(text, terms) {
    const frag = document.createDocumentFragment();
    const parts = String(text).split(WORD);
    let buf = "";
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      if (i % 2 === 1 && terms.length && matches(part, terms)) {
        if (buf) { frag.appendChild(document.createTextNode(buf)); buf = ""; }
        frag.appendChild(el("mark", null, part));
      } else {
        buf += part;
      }
    }
    if (buf) frag.appendChild(document.createTextNode(buf));
    return frag;
  }

  // -- score bars ------------------------------------------------------------
  function scoreBar(label, score, max, rank, cls) {
    const wrap = el("span", "bar " + (cls || ""));
    wrap.title = label + " score " + score.toFixed(4) + (rank ? " (rank " + rank + ")" : "");
    wrap.appendChild(el("span", "bar-label", label));
    const track = el("span", "bar-track");
    const fill = el("span", "bar-fill");
    const frac = max > 0 ? Math.max(0, Math.min(1, score / max)) : 0;
    fill.style.width = (frac * 100).toFixed(1) + "%";
    track.appendChild(fill);
    wrap.appendChild(track);
    wrap.appendChild(el("span", "bar-value", score.toFixed(3)));
    return wrap;
  }

  function stageMaxima(hits) {
    const max = { __final: 0 };
    for (const h of hits) {
      max.__final = Math.max(max.__final, h.score);
      for (const [name, s] of Object.entries(h.stages || {})) max[name] = Math.max(max[name] || 0, s.score);
    }
    return max;
  }

  // -- results ---------------------------------------------------------------
  function groupByDocument(hits) {
    const groups = new Map();
    for (const h of hits) {
      if (!groups.has(h.doc_id)) groups.set(h.doc_id, { doc_id: h.doc_id, title: h.title, hits: [] });
      groups.get(h.doc_id).hits.push(h);
    }
    return [...groups.values()];
  }

  function breadcrumb(hit) {
    const bc = el("div", "breadcrumb");
    const parts = [hit.title, ...(hit.section_path || [])];
    parts.forEach((p, i) => {
      if (i) bc.appendChild(el("span", "sep", " › ")); // spaces: copied text reads "A › B"
      bc.appendChild(el("span", i === 0 ? "crumb crumb-doc" : "crumb", p));
    });
    if (!hit.section_path || !hit.section_path.length) bc.appendChild(el("span", "crumb crumb-lead", " (lead)"));
    return bc;
  }

  function renderHit(hit, max, terms) {
    const box = el("article", "hit");
    box.dataset.passageId = hit.passage_id || "";
    const head = el("div", "hit-head");
    head.appendChild(el("span", "rank", "#" + hit.rank));
    head.appendChild(breadcrumb(hit));
    // FetchHR: the encoder layer whose query fetched this hit (its stage is named "layerN")
    const layer = Object.keys(hit.stages || {}).find((n) => /^layer\d+$/.test(n));
    if (layer) head.appendChild(el("span", "chip chip-layer", "fetched by layer " + layer.slice(5)));
    box.appendChild(head);
    const text = el("p", "hit-text");
    text.appendChild(highlight(hit.text || "", terms));
    box.appendChild(text);
    const bars = el("div", "bars");
    for (const [name, s] of Object.entries(hit.stages || {})) {
      bars.appendChild(scoreBar(name, s.score, max[name] || 0, s.rank, "bar-" + name));
    }
    bars.appendChild(scoreBar("final", hit.score, max.__final, hit.rank, "bar-final"));
    box.appendChild(bars);
    box.appendChild(el("div", "reason", hit.reason || ""));
    return box;
  }

  function renderResults(res, container) {
    container = container || $("#results");
    container.textContent = "";
    const terms = queryTerms(res.query);
    state.terms = terms;
    state.hitPaths = new Map();
    const max = stageMaxima(res.hits);
    for (const g of groupByDocument(res.hits)) {
      const paths = new Set(g.hits.map((h) => JSON.stringify(h.section_path || [])));
      const best = JSON.stringify(g.hits[0].section_path || []);
      state.hitPaths.set(g.doc_id, { paths, best, passages: new Set(g.hits.map((h) => h.passage_id)) });
      const group = el("section", "doc-group");
      group.dataset.docId = g.doc_id;
      const head = el("header", "doc-head");
      const title = el("button", "doc-title", g.title);
      title.type = "button";
      title.title = "show the table of contents of " + g.title;
      title.addEventListener("click", () => openDocument(g.doc_id));
      head.appendChild(title);
      const doc = g.hits[0].stages && g.hits[0].stages.doc;
      if (doc) head.appendChild(scoreBar("document", doc.score, max.doc || 0, doc.rank, "bar-doc"));
      head.appendChild(el("span", "doc-count", g.hits.length + (g.hits.length === 1 ? " hit" : " hits")));
      group.appendChild(head);
      for (const h of g.hits) group.appendChild(renderHit(h, max, terms));
      container.appendChild(group);
    }
    $("#empty").hidden = res.hits.length > 0;
  }

  /* A set answer (the sets method: res.answer_set is a list): the parsed expression on top, then each
   * member with, per constraint, the sentence of its document that supports it. textContent only. */
  function renderSetAnswer(res, container) {
    container = container || $("#results");
    container.textContent = "";
    const terms = queryTerms(res.query);
    state.terms = terms;
    state.hitPaths = new Map();
    const step = (name) => (res.trace || []).find((s) => s.name === name) || { detail: {} };
    const parse = step("parse").detail;
    const perConstraint = step("classify").detail.per_constraint || {};
    const members = new Set(res.answer_set);
    const box = el("section", "set-answer");
    const head = el("header", "set-head");
    head.appendChild(el("div", "set-expr", parse.expression || res.query));
    const info = [(parse.template ? "template " + parse.template : ""),
      res.answer_set.length + (res.answer_set.length === 1 ? " member" : " members")];
    const shown = res.hits.filter((h) => members.has(h.doc_id)).length;
    if (shown < res.answer_set.length) info.push("showing " + shown);
    head.appendChild(el("div", "set-info", info.filter(Boolean).join(" · ")));
    for (const note of parse.notes || []) head.appendChild(el("div", "set-note", note));
    box.appendChild(head);
    const list = el("ol", "set-members");
    const others = [];
    for (const h of res.hits) {
      state.hitPaths.set(h.doc_id, {
        paths: new Set([JSON.stringify(h.section_path || [])]), best: JSON.stringify(h.section_path || []),
        passages: new Set(h.evidence || []),
      });
      if (!members.has(h.doc_id)) { others.push(h); continue; }
      const li = el("li", "set-member");
      li.dataset.docId = h.doc_id;
      const title = el("button", "doc-title", h.title);
      title.type = "button";
      title.title = "show the table of contents of " + h.title;
      title.addEventListener("click", () => openDocument(h.doc_id));
      li.appendChild(title);
      li.appendChild(el("span", "set-score", "score " + h.score.toFixed(3)));
      const support = el("ul", "set-support");
      for (const [constraint, c] of Object.entries(perConstraint)) {
        const stage = (h.stages || {})[constraint];
        const row = el("li", c.role === "negative" ? "set-negated" : "set-supported");
        row.appendChild(el("span", "set-constraint", (c.role === "negative" ? "not " : "") + constraint));
        if (stage) row.appendChild(el("span", "set-prob", stage.score.toFixed(3)));
        const sentence = (h.support || {})[constraint];
        if (sentence) {
          const q = el("q", "set-sentence");
          q.appendChild(highlight(sentence, queryTerms(constraint)));
          row.appendChild(q);
        }
        support.appendChild(row);
      }
      li.appendChild(support);
      list.appendChild(li);
    }
    box.appendChild(list);
    if (others.length) {
      const more = el("details", "set-others");
      more.appendChild(el("summary", null, others.length + " other candidates (not members), best first"));
      const ol = el("ol");
      for (const h of others) ol.appendChild(el("li", null, h.title + " · " + h.score.toFixed(3)));
      more.appendChild(ol);
      box.appendChild(more);
    }
    container.appendChild(box);
    $("#empty").hidden = res.answer_set.length > 0 || res.hits.length > 0;
  }

  /* The text with [start, end) wrapped in <mark class="answer-span">: text nodes only. */
  function markSpan(text, start, end) {
    const frag = document.createDocumentFragment();
    text = String(text);
    frag.appendChild(document.createTextNode(text.slice(0, start)));
    frag.appendChild(el("mark", "answer-span", text.slice(start, end)));
    frag.appendChild(document.createTextNode(text.slice(end)));
    return frag;
  }

  /* Answer mode: the best answer first, highlighted inside its passage with the breadcrumb, then the
   * other candidate answers; the passages that were read follow as ordinary results. */
  function renderAnswer(body) {
    const box = $("#answer-box");
    box.textContent = "";
    const answers = body.answers || [];
    if (!answers.length) {
      box.appendChild(el("p", "answer-none", "No answer: the reader found no span it accepts in these passages."));
      box.hidden = false;
      return;
    }
    const best = answers[0];
    const passage = (body.passages || []).find((h) => h.passage_id === best.passage_id);
    const head = el("div", "answer-main");
    head.appendChild(el("span", "answer-label", "Answer"));
    head.appendChild(el("strong", "answer-text", best.text));
    head.appendChild(el("span", "answer-score", "score " + best.score.toFixed(3)));
    box.appendChild(head);
    box.appendChild(el("div", "answer-crumb", best.breadcrumb + (passage ? " · passage #" + passage.rank : "")));
    if (passage) {
      const p = el("p", "answer-passage");
      p.appendChild(markSpan(passage.text, best.start, best.end));
      box.appendChild(p);
    }
    const also = (best.evidence || []).slice(1);
    if (also.length) box.appendChild(el("div", "answer-also", "also in: " + also.map((e) => e.breadcrumb).join("; ")));
    if (answers.length > 1) {
      const more = el("div", "answer-others");
      more.appendChild(el("h3", null, "Other candidate answers"));
      const ol = el("ol");
      for (const a of answers.slice(1)) {
        const li = el("li", "answer-other");
        li.appendChild(el("strong", null, a.text));
        li.appendChild(el("span", "answer-score", " " + a.score.toFixed(3)));
        li.appendChild(el("span", "answer-crumb", " · " + a.breadcrumb));
        ol.appendChild(li);
      }
      more.appendChild(ol);
      box.appendChild(more);
    }
    box.hidden = false;
  }

  function answerMode() {
    return !$("#answer-wrap").hidden && $("#answer").checked;
  }

  function renderTimings(res, roundTripMs, serverMs) {
    const box = $("#timings");
    box.textContent = "";
    box.appendChild(el("span", "t-label", res.hits.length + " hits · " + res.retriever + " · " + res.level));
    for (const step of res.trace || []) {
      const chip = el("span", "chip", step.name + " " + step.ms.toFixed(1) + " ms");
      chip.title = JSON.stringify(step.detail || {});
      box.appendChild(chip);
    }
    box.appendChild(el("span", "chip chip-total", "search " + res.took_ms.toFixed(1) + " ms"));
    if (serverMs) box.appendChild(el("span", "chip chip-total", "server " + serverMs + " ms"));
    box.appendChild(el("span", "chip chip-total", "round trip " + roundTripMs.toFixed(0) + " ms"));
    if (res.ignored && res.ignored.length) {
      box.appendChild(el("span", "chip chip-note", "not used by " + res.retriever + ": " + res.ignored.join(", ")));
    }
    box.hidden = false;
  }

  /* "how this was found": the trace as a collapsible tree, one branch per step (hiera search --explain on
   * the command line). A mapping of plain values, or a list item that is one, is one line ("title: … ·
   * score: …"); anything nested opens a deeper list. textContent only. */
  function explainValue(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
    if (Array.isArray(v) && v.every((x) => x === null || typeof x !== "object")) return "[" + v.map(explainValue).join(", ") + "]";
    return String(v);
  }

  function explainFlat(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v) &&
      Object.values(v).every((x) => x === null || typeof x !== "object" ||
        (Array.isArray(x) && x.every((y) => y === null || typeof y !== "object")));
  }

  function explainLine(obj) {
    return Object.entries(obj).map(([k, v]) => k + ": " + explainValue(v)).join(" · ");
  }

  function explainTree(value) {
    const ul = el("ul", "explain-tree");
    if (Array.isArray(value)) {
      for (const item of value) {
        if (explainFlat(item)) { ul.appendChild(el("li", "explain-item", explainLine(item))); continue; }
        if (item === null || typeof item !== "object") { ul.appendChild(el("li", "explain-item", explainValue(item))); continue; }
        const plain = Object.fromEntries(Object.entries(item).filter(([, v]) => v === null || typeof v !== "object"));
        const nested = Object.fromEntries(Object.entries(item).filter(([, v]) => v !== null && typeof v === "object"));
        const li = el("li", "explain-item", explainLine(plain));
        li.appendChild(explainTree(nested));
        ul.appendChild(li);
      }
      return ul;
    }
    for (const [k, v] of Object.entries(value || {})) {
      if (v === null || typeof v !== "object" || (Array.isArray(v) && v.every((x) => x === null || typeof x !== "object"))) {
        ul.appendChild(el("li", "explain-item", k + ": " + explainValue(v)));
      } else if (explainFlat(v) && Object.keys(v).length) {
        ul.appendChild(el("li", "explain-item", k + ": " + explainLine(v)));
      } else {
        const li = el("li", "explain-item");
        const d = el("details", "explain-node");
        const size = Array.isArray(v) ? v.length : Object.keys(v).length;
        d.appendChild(el("summary", null, k + " (" + size + ")"));
        d.appendChild(explainTree(v));
        li.appendChild(d);
        ul.appendChild(li);
      }
    }
    return ul;
  }

  function renderExplain(res) {
    const box = $("#explain");
    const list = $("#explain-steps");
    list.textContent = "";
    const steps = res.trace || [];
    for (const step of steps) {
      const li = el("li", "explain-step");
      li.dataset.step = step.name;
      const d = el("details", "explain-node");
      d.appendChild(el("summary", null, step.name + " · " + step.ms.toFixed(1) + " ms"));
      d.appendChild(explainTree(step.detail || {}));
      li.appendChild(d);
      list.appendChild(li);
    }
    box.hidden = steps.length === 0;
  }

  // -- search ----------------------------------------------------------------
  function currentParams() {
    const name = $("#retriever").value;
    const p = new URLSearchParams();
    p.set("q", $("#q").value);
    p.set("retriever", name);
    p.set("k", $("#k").value);
    p.set("level", $("#level").value);
    if ($("#filter").value.trim()) p.set("filter", $("#filter").value.trim());
    if (!$("#rerank-wrap").hidden && $("#rerank").checked) p.set("rerank", "true");
    if (answerMode()) p.set("answer", "true");
    // one entry per rendered parameter control, under its canonical name; an
    // emptied field is left out so that the server uses its default
    for (const input of [...paramControls(), ...(answerMode() ? readerControls() : [])]) {
      const v = controlValue(input);
      if (v !== "") p.set(input.dataset.param, v);
    }
    return p;
  }

  async function runSearch() {
    const q = $("#q").value;
    if (!q.trim()) {
      showError("Type a question first.");
      $("#q").focus();
      return;
    }
    const params = currentParams();
    history.replaceState(null, "", "?" + params.toString());
    const seq = ++state.seq;
    const btn = $("#search-btn");
    btn.disabled = true;
    btn.textContent = "Searching…";
    $("#results").classList.add("loading");
    const t0 = performance.now();
    try {
      const asking = answerMode();
      const api = new URLSearchParams(params);
      api.delete("answer");
      if (asking) api.delete("level"); // the reader reads passages
      const resp = await apiFetch((asking ? "answer?" : "search?") + api.toString());
      const body = await resp.json().catch(() => null);
      if (seq !== state.seq) return; // a newer search was started
      if (!resp.ok) {
        const detail = body && typeof body.detail === "string" ? body.detail : resp.statusText;
        throw new Error(detail + " (HTTP " + resp.status + ")");
      }
      showError("");
      let res = body;
      if (asking) {
        renderAnswer(body);
        res = { query: body.question, level: "passage", hits: body.passages, retriever: body.retriever,
          trace: body.trace, took_ms: body.took_ms, ignored: body.ignored };
      } else {
        $("#answer-box").hidden = true;
      }
      state.results = res;
      (Array.isArray(res.answer_set) ? renderSetAnswer : renderResults)(res);
      renderTimings(res, performance.now() - t0, resp.headers.get("X-Process-Time-Ms"));
      renderExplain(body);
      if (state.openDoc && state.hitPaths.has(state.openDoc)) openDocument(state.openDoc);
    } catch (e) {
      if (seq !== state.seq) return;
      showError(e.message.startsWith("Failed to fetch") ? "cannot reach the server" : e.message);
    } finally {
      if (seq === state.seq) {
        btn.disabled = false;
        btn.textContent = "Search";
        $("#results").classList.remove("loading");
      }
    }
  }

  // -- document panel --------------------------------------------------------
  function sectionIndex(doc) {
    const map = new Map();
    map.set("[]", { title: "Lead", path: [], passages: doc.lead_passages || [] });
    const walk = (nodes) => {
      for (const n of nodes) {
        const key = JSON.stringify(n.path);
        if (!map.has(key)) map.set(key, { title: n.title, path: n.path, passages: [] });
        map.get(key).passages.push(...n.passages);
        walk(n.sections || []);
      }
    };
    walk(doc.sections || []);
    return map;
  }

  function showSection(doc, sections, key) {
    const view = $("#section-view");
    view.textContent = "";
    const sec = sections.get(key);
    if (!sec) return;
    view.appendChild(el("h3", "section-title", [doc.title, ...sec.path].join(" › ")));
    const hits = state.hitPaths.get(doc.id);
    if (!sec.passages.length) view.appendChild(el("p", "muted", "This section has no text of its own."));
    for (const p of sec.passages) {
      const para = el("p", "passage");
      if (hits && hits.passages.has(p.id)) para.classList.add("hit");
      para.appendChild(highlight(p.text, state.terms));
      view.appendChild(para);
    }
    for (const item of document.querySelectorAll("#toc .toc-item")) item.classList.toggle("current", item.dataset.path === key);
  }

  async function openDocument(docId) {
    const panel = $("#panel");
    state.openDoc = docId;
    let doc;
    try {
      doc = await getJSON("documents/" + encodeURIComponent(docId));
    } catch (e) {
      showError(e.message);
      return;
    }
    if (state.openDoc !== docId) return;
    $("#panel-title").textContent = doc.title;
    const summary = doc.lead && doc.lead.length ? doc.lead.join(" ") : "";
    $("#panel-summary").textContent = summary.length > 320 ? summary.slice(0, 317) + "…" : summary;
    const sections = sectionIndex(doc);
    const hits = state.hitPaths.get(docId);
    const toc = $("#toc");
    toc.textContent = "";
    const items = [{ depth: 1, title: "Lead", path: [] }, ...doc.toc];
    for (const t of items) {
      const key = JSON.stringify(t.path);
      const li = el("li", "toc-item depth-" + Math.min(t.depth, 6));
      li.dataset.path = key;
      li.style.paddingLeft = (0.6 + (t.depth - 1) * 1.1) + "rem";
      const sec = sections.get(key);
      const n = sec ? sec.passages.length : 0;
      const link = el("button", "toc-link", t.title);
      link.type = "button";
      link.addEventListener("click", () => showSection(doc, sections, key));
      li.appendChild(link);
      li.appendChild(el("span", "toc-count", n ? String(n) : ""));
      if (hits && hits.paths.has(key)) {
        li.classList.add("hit");
        if (key === hits.best) li.classList.add("best");
      }
      toc.appendChild(li);
    }
    panel.hidden = false;
    document.body.classList.add("panel-open");
    // open the section of the document's best-ranked hit
    showSection(doc, sections, hits && sections.has(hits.best) ? hits.best : "[]");
  }

  function closePanel() {
    $("#panel").hidden = true;
    state.openDoc = null;
    document.body.classList.remove("panel-open");
  }

  // -- controls --------------------------------------------------------------
  function fillSelect(sel, values, selected) {
    sel.textContent = "";
    for (const v of values) {
      const o = el("option", null, v);
      o.value = v;
      if (v === selected) o.selected = true;
      sel.appendChild(o);
    }
  }

  function methodByName(name) {
    return state.methods.find((m) => m.name === name) || null;
  }

  function paramControls() {
    return [...document.querySelectorAll("#method-params [data-param]")];
  }

  function readerControls() {
    return [...document.querySelectorAll("#reader-params [data-param]")];
  }

  /* The reader's parameter controls (from /methods, kind "reader"), shown in answer mode only. */
  function syncReaderControls() {
    const box = $("#reader-params");
    const on = answerMode();
    box.hidden = !on;
    if (!on) return;
    if (!box.childElementCount) {
      for (const r of state.readers.filter((m) => m.available !== false)) {
        for (const p of r.params || []) if (p.http !== false) box.appendChild(paramControl(p));
      }
    }
    $("#level").value = "passage";
  }

  function controlValue(input) {
    if (input.type === "checkbox") return input.checked ? "true" : "false";
    return String(input.value).trim();
  }

  function setControlValue(input, value) {
    if (input.type === "checkbox") input.checked = /^(1|true|yes|on)$/i.test(String(value).trim());
    else input.value = String(value);
  }

  function asText(v) {
    return v === null || v === undefined ? "" : String(v);
  }

  /* The tooltip of one parameter: its help, its bounds or choices, its other names. */
  function paramTitle(p) {
    const bits = [p.help || p.name];
    if (p.min !== null && p.min !== undefined || p.max !== null && p.max !== undefined) {
      bits.push("range " + asText(p.min ?? "−∞") + " to " + asText(p.max ?? "∞"));
    }
    if (p.default !== null && p.default !== undefined) bits.push("default " + asText(p.default));
    if (p.aliases && p.aliases.length) bits.push("also called " + p.aliases.join(", "));
    return bits.join(" · ");
  }

  /* One labelled control for a parameter declared in /methods. */
  function paramControl(p) {
    let input;
    if (Array.isArray(p.choices)) {
      input = el("select");
      for (const c of p.choices) {
        const o = el("option", null, c);
        o.value = c;
        const needs = (p.choice_requires && p.choice_requires[c]) || [];
        const lacking = needs.filter((kind) => state.missingKinds.has(kind));
        if (lacking.length) {
          o.disabled = true;
          o.textContent = c + " (needs the " + lacking.join(" and ") + " index)";
        }
        input.appendChild(o);
      }
      input.value = asText(p.default);
    } else if (p.type === "bool") {
      input = el("input");
      input.type = "checkbox";
      input.checked = p.default === true || /^(1|true|yes|on)$/i.test(asText(p.default));
    } else if (p.type === "int" || p.type === "float") {
      input = el("input");
      input.type = "number";
      if (p.min !== null && p.min !== undefined) input.min = String(p.min);
      if (p.max !== null && p.max !== undefined) input.max = String(p.max);
      input.step = p.type === "int" ? "1" : "0.05";
      input.inputMode = p.type === "int" ? "numeric" : "decimal";
      input.value = asText(p.default);
    } else { // str or path without choices
      input = el("input");
      input.type = "text";
      input.spellcheck = false;
      input.value = asText(p.default);
    }
    input.id = "param-" + p.name;
    input.name = p.name;
    input.dataset.param = p.name;
    input.dataset.type = p.type;
    input.title = paramTitle(p);
    const label = el("label", "param param-" + p.type);
    label.title = input.title;
    label.appendChild(el("span", "param-name", p.name.replace(/_/g, " ")));
    label.appendChild(input);
    return label;
  }

  /* Controls for the chosen method, prefilled with this collection's defaults. */
  function syncControls() {
    const m = methodByName($("#retriever").value);
    const box = $("#method-params");
    box.textContent = "";
    // server-side parameters (model directories) are set with `hiera build --set`, never by a request
    for (const p of (m && m.params) || []) if (p.http !== false) box.appendChild(paramControl(p));
    $("#method-help").textContent = (m && m.help) || "";
    $("#retriever").title = (m && m.help) || "";
    // a method that ranks only documents (bm25-doc) cannot be asked for passages
    const levels = (m && m.levels && m.levels.length) ? m.levels : ["passage", "doc"];
    for (const opt of $("#level").options) opt.disabled = !levels.includes(opt.value);
    if (!levels.includes($("#level").value)) $("#level").value = levels[0];
  }

  /* /methods, or (from a server without it) a bare list from /health: no parameter controls. */
  async function loadMethods(h) {
    try {
      const list = await getJSON("methods");
      if (Array.isArray(list)) {
        state.readers = list.filter((m) => m.kind === "reader");
        return list.filter((m) => (m.kind || "retriever") === "retriever");
      }
    } catch (e) {
      console.warn("no /methods on this server (" + e.message + "); showing methods without parameters");
    }
    return (h.retrievers || []).map((name) => ({
      name, help: "", params: [], requires: [], available: true, missing: [],
      levels: ((h.retriever_levels || {})[name]) || ["passage", "doc"],
    }));
  }

  function fillMethods(selected) {
    const sel = $("#retriever");
    sel.textContent = "";
    for (const m of state.methods) {
      const o = el("option", null, m.name);
      o.value = m.name;
      o.title = m.help || "";
      if (m.available === false) {
        o.disabled = true;
        const missing = m.missing && m.missing.length ? m.missing.join(" and ") : "an";
        o.textContent = m.name + " (needs the " + missing + " index, not built)";
        o.title = (m.help ? m.help + " · " : "") + "this collection was built without the " + missing + " index";
      }
      sel.appendChild(o);
    }
    sel.value = selected;
  }

  /* Parameter values from a shared link, under a parameter's name or one of its aliases. */
  function restoreParams(url) {
    const m = methodByName($("#retriever").value);
    for (const p of (m && m.params) || []) {
      const names = [p.name, ...(p.aliases || [])].filter((n) => !FIXED.has(n));
      const key = names.find((n) => url.has(n));
      const input = document.getElementById("param-" + p.name);
      if (key !== undefined && input) setControlValue(input, url.get(key));
    }
  }

  function describeCollection(h) {
    const s = h.stats || {};
    const fmt = (n) => Number(n || 0).toLocaleString("en");
    const models = Object.values(h.models || {}).map((m) => m.name);
    const parts = [h.collection, fmt(s.documents) + " documents", fmt(s.passages) + " passages"];
    if (models.length) parts.push([...new Set(models)].join(", "));
    return parts.join(" · ");
  }

  async function init() {
    takeKeyFromUrl();
    $("#search-form").addEventListener("submit", (ev) => { ev.preventDefault(); runSearch(); });
    $("#retriever").addEventListener("change", syncControls);
    $("#panel-close").addEventListener("click", closePanel);
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && !$("#panel").hidden) closePanel();
      if (ev.key === "/" && document.activeElement !== $("#q")) { ev.preventDefault(); $("#q").focus(); }
    });
    try {
      state.health = await getJSON("health");
    } catch (e) {
      showError("The server did not answer /health: " + e.message);
      $("#collection").textContent = "no collection";
      return;
    }
    const h = state.health;
    $("#collection").textContent = describeCollection(h);
    state.methods = await loadMethods(h);
    state.missingKinds = new Set(state.methods.filter((m) => m.available === false).flatMap((m) => m.missing || []));
    const usable = state.methods.filter((m) => m.available !== false).map((m) => m.name);
    const url = new URLSearchParams(location.search);
    const wanted = url.get("retriever");
    const first = usable.includes(wanted) ? wanted : usable.includes("dhr") ? "dhr" : usable[0];
    fillMethods(first);
    $("#rerank-wrap").hidden = !h.reranker;
    if (h.reranker) $("#rerank-wrap").title = "rescore the top hits with " + (h.reranker.name || "the server's cross-encoder");
    for (const key of ["k", "level", "filter"]) {
      if (url.has(key)) $("#" + key).value = url.get(key);
    }
    syncControls(); // after level: a level the method lacks falls back to one it has
    restoreParams(url);
    if (h.reranker && url.has("rerank")) $("#rerank").checked = /^(1|true|yes|on)$/i.test(url.get("rerank"));
    $("#answer-wrap").hidden = !h.reader;
    if (h.reader) {
      $("#answer-wrap").title = "read the retrieved passages with " + h.reader.name + " and show answers first";
      $("#answer").checked = /^(1|true|yes|on)$/i.test(url.get("answer") || "");
      $("#answer").addEventListener("change", syncReaderControls);
      syncReaderControls();
      for (const input of readerControls()) if (url.has(input.dataset.param)) setControlValue(input, url.get(input.dataset.param));
    }
    document.body.dataset.ready = "1";
    if (url.get("q")) {
      $("#q").value = url.get("q");
      runSearch();
    }
  }

  // for tests and the curious: window.hieraUI.highlight("text", ["term"])
  window.hieraUI = { highlight, queryTerms, renderResults, groupByDocument };
  document.addEventListener("DOMContentLoaded", init);
})();
