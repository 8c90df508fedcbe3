"""The inbox page's script and style, served as files of the inbox (its Content Security
Policy allows no inline script or style).

The script signs the page in: it takes the person's token from the link's fragment
(``#token=...``), keeps it in the tab's ``sessionStorage`` only, takes it out of the
address bar, and sends it as ``Authorization: Bearer`` with every request (never a
cookie: see :mod:`clearance.inbox._auth`). It shows one page of asks (``GET /asks``, with
the filters and grouping chosen, which the address keeps), and keeps it live from the
inbox's events (``GET /events``, read with ``fetch``: an ``EventSource`` cannot send the
header): it fetches only the cards an event names, adds the new ones the page has room
for, removes those no longer pending and leaves every other card as it is (a person's
scope choice is not reset under their cursor). Grouped, each group's heading answers the
group's cards on the page, each as shown (``POST /answer-group``). Each card counts down
the time its ask can still be answered. While the ask store cannot be reached, one
banner says so and every answer control is disabled.

Colours mean what happened: an allowed ask is green, a denied one red, an answer refused
(answered elsewhere, closed, changed) amber; a card whose host is gone, or past its time,
is dashed. The script never builds HTML from data: the cards come from the server, parsed
by ``DOMParser`` (which runs no script); menus, headings and replies are set as text.
"""

from __future__ import annotations

__all__ = ["INBOX_CSS", "INBOX_JS"]

INBOX_JS = """\
"use strict";
(() => {
  const KEY = "clearance-inbox-token";
  const $ = (id) => document.getElementById(id);
  const list = $("asks");
  const empty = $("empty");
  const count = $("count");
  const status = $("status");
  const signin = $("signin");
  const banner = $("outage");
  const filters = $("filters");
  const FIELDS = ["host", "tool", "principal", "policy"];
  const LABELS = { deny: "Deny", allow_once: "Allow once", allow_session: "Allow for this session",
                   allow_always: "Allow always" };
  const limit = Number(document.body.dataset.pageSize || "50");
  // Asks answered (or refused) on this page: their cards stay, with what the inbox said.
  const kept = new Set();
  const busy = new Set();
  let stopped = false;
  let outage = null;
  let offset = 0;
  let total = 0;
  let waiting = 0;
  let groups = {};
  let facetsTimer = null;
  let loaded = false;

  // The person's token: in the link's fragment (never sent to a server), then only in this
  // tab's sessionStorage (this origin's alone) and sent as a bearer header, never a cookie.
  const found = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (found) {
    sessionStorage.setItem(KEY, decodeURIComponent(found[1]));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  const token = sessionStorage.getItem(KEY);
  const wanted = new URLSearchParams(window.location.search);

  function auth(extra) {
    return Object.assign({ Authorization: `Bearer ${token}` }, extra || {});
  }

  function signedOut(message) {
    stopped = true;
    sessionStorage.removeItem(KEY);
    $("user").hidden = true;
    $("signout").hidden = true;
    signin.hidden = false;
    status.textContent = message;
  }

  const cards = () => Array.from(list.querySelectorAll("article.ask"));
  const cardOf = (id) => cards().find((card) => card.dataset.askId === id);
  const grouping = () => filters.elements.group.value;

  function query(extra) {
    const q = new URLSearchParams();
    for (const name of FIELDS) {
      // Until the menus are filled, the link's own filter (a reload keeps the view).
      const value = filters.elements[name].value || wanted.get(name);
      if (value) q.set(name, value);
    }
    if (grouping()) q.set("group", grouping());
    for (const [name, value] of extra || []) q.append(name, value);
    return q;
  }

  // One request to the inbox: its JSON reply, or null (said in the status line).
  async function ask(path, options) {
    let response;
    try {
      response = await fetch(path, Object.assign({ cache: "no-store", credentials: "omit" },
                                                  options || {}));
    } catch (error) {
      status.textContent = "The inbox is not answering; trying again.";
      return null;
    }
    const reply = await response.json().catch(() => ({}));
    reply.status = response.status;
    if (response.status === 401) signedOut(reply.message || "Signed out: open your link again.");
    if (response.status === 503) setOutage(reply.message || "The ask store cannot be reached.");
    else if (response.ok && outage !== null) setOutage(null);
    return reply;
  }

  const get = (path) => ask(path, { headers: auth({ Accept: "application/json" }) });

  function parse(html) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    return Array.from(doc.querySelectorAll("article.ask"));
  }

  // The whole view: this page of the filter's asks, and the filters' choices.
  async function load() {
    const reply = await get(`/asks?${query([["offset", offset], ["limit", limit],
                                            ["groups", "1"]])}`);
    if (!reply || reply.status !== 200) return;
    loaded = true;
    signedIn(reply.user);
    for (const card of cards()) if (!kept.has(card.dataset.askId)) card.remove();
    for (const card of parse(reply.cards)) {
      if (!cardOf(card.dataset.askId)) list.append(document.adoptNode(card));
    }
    counts(reply);
    facets(reply.groups);
    arrange();
    status.textContent = `Live, updated ${new Date().toLocaleTimeString()}`;
  }

  function signedIn(user) {
    $("who").textContent = user;
    $("user").hidden = false;
    $("signout").hidden = false;
  }

  function counts(reply) {
    total = reply.total;
    waiting = reply.waiting;
  }

  // What an event named: only those cards are fetched (the ones this view holds).
  async function update(change) {
    if (change.resync) return load();
    for (const id of change.removed || []) {
      const card = cardOf(id);
      if (card && !kept.has(id)) card.remove();
    }
    const ids = (change.added || []).concat(change.changed || []);
    const reply = await get(`/asks?${query([["limit", "0"]].concat(ids.map((id) => ["id", id])))}`);
    if (!reply || reply.status !== 200) return;
    counts(reply);
    // A new ask joins this page when it has room (the last page); else it is counted.
    const room = () => cards().filter((card) => !kept.has(card.dataset.askId)).length < limit;
    for (const card of parse(reply.cards)) {
      const id = card.dataset.askId;
      const old = cardOf(id);
      if (old === undefined) {
        if (room()) list.append(document.adoptNode(card));
      } else if (!kept.has(id) && card.classList.contains("host-gone")) {
        old.replaceWith(document.adoptNode(card));  // its host died: no answer form
      }
    }
    arrange();
    // The menus' counts: at most one look every 5 s while asks keep changing.
    if (facetsTimer === null) {
      facetsTimer = setTimeout(() => { facetsTimer = null; refreshFacets(); }, 5000);
    }
    status.textContent = `Live, updated ${new Date().toLocaleTimeString()}`;
  }

  async function refreshFacets() {
    const reply = await get(`/asks?${query([["limit", "0"], ["groups", "1"]])}`);
    if (reply && reply.status === 200) {
      counts(reply);
      facets(reply.groups);
      arrange();
    }
  }

  // The filters' menus: each value of each field with its count (as text, never markup).
  function facets(found) {
    groups = found || groups;
    for (const name of FIELDS) {
      const select = filters.elements[name];
      const chosen = select.value || wanted.get(name) || "";
      wanted.delete(name);
      const values = (groups[name] || []).slice();
      if (chosen && !values.some(([value]) => value === chosen)) values.push([chosen, 0]);
      select.replaceChildren(new Option("any", ""));
      for (const [value, n] of values) {
        select.append(new Option(`${value || "(none)"} (${n})`, value, false, value === chosen));
      }
      select.value = chosen;
    }
  }

  // The cards in order, under a heading per group (with its answer-the-group buttons).
  function arrange() {
    const by = grouping();
    const all = cards();
    for (const section of Array.from(list.querySelectorAll("section.group"))) {
      if (!by) section.replaceWith(...section.querySelectorAll("article.ask"));
    }
    if (by) {
      const sections = new Map();
      for (const section of Array.from(list.querySelectorAll("section.group"))) {
        sections.set(section.dataset.key, section);
      }
      for (const card of all) {
        const key = card.dataset[by] || "";
        let section = sections.get(key);
        if (!section) {
          section = groupSection(by, key);
          sections.set(key, section);
          list.append(section);
        }
        if (card.parentElement !== section) section.append(card);
      }
      for (const [key, section] of sections) {
        const members = section.querySelectorAll("article.ask");
        if (members.length === 0) { section.remove(); sections.delete(key); continue; }
        heading(section);
      }
    }
    recount();
    syncControls();
  }

  function groupSection(by, key) {
    const section = document.createElement("section");
    section.className = "group";
    section.dataset.key = key;
    const head = document.createElement("header");
    const title = document.createElement("h2");
    const name = document.createElement("span");
    name.className = "field";
    name.textContent = `${by} `;
    const value = document.createElement("code");
    value.textContent = key || "(none)";
    const size = document.createElement("span");
    size.className = "size";
    title.append(name, value, size);
    const buttons = document.createElement("div");
    buttons.className = "bulk";
    for (const [decision, label] of Object.entries(LABELS)) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = `bulk ${decision}`;
      button.dataset.decision = decision;
      button.dataset.label = label;
      button.addEventListener("click", () => answerGroup(section, decision));
      buttons.append(button);
    }
    head.append(title, buttons);
    section.append(head);
    return section;
  }

  const answerable = (card) => !kept.has(card.dataset.askId) && !busy.has(card.dataset.askId)
    && !card.classList.contains("host-gone") && !card.classList.contains("expired")
    && card.querySelector("form") !== null;

  function heading(section) {
    const by = grouping();
    const members = Array.from(section.querySelectorAll("article.ask"));
    const open = members.filter(answerable);
    const inAll = (groups[by] || []).find(([value]) => value === section.dataset.key);
    const size = section.querySelector(".size");
    size.textContent = ` · ${members.length} shown` + (inAll ? ` of ${inAll[1]}` : "");
    for (const button of section.querySelectorAll("button.bulk")) {
      button.textContent = `${button.dataset.label}: these ${open.length}`;
    }
  }

  function recount() {
    count.textContent = `${waiting} ask${waiting === 1 ? "" : "s"} waiting`;
    empty.hidden = cards().length > 0;
    const shown = cards().filter((card) => !kept.has(card.dataset.askId)).length;
    const rest = Math.max(0, total - offset - shown);
    $("pager").hidden = total <= limit && offset === 0;
    $("range").textContent = shown
      ? `${offset + 1} to ${offset + shown} of ${total}` + (rest ? ` · ${rest} more` : "")
      : `${total} in all`;
    $("prev").disabled = offset === 0;
    $("next").disabled = rest === 0;
  }

  // Answering is possible only while the store is reachable, the ask is open and no
  // answer of it is on its way.
  function syncControls() {
    for (const card of cards()) {
      const controls = card.querySelector("fieldset.controls");
      if (controls) controls.disabled = outage !== null || !answerable(card);
    }
    for (const section of list.querySelectorAll("section.group")) {
      const open = Array.from(section.querySelectorAll("article.ask")).filter(answerable);
      for (const button of section.querySelectorAll("button.bulk")) {
        button.disabled = outage !== null || open.length === 0;
      }
      heading(section);
    }
  }

  function setOutage(message) {
    outage = message;
    banner.hidden = message === null;
    banner.textContent = message || "";
    document.body.classList.toggle("outage", message !== null);
    syncControls();
  }

  // What the inbox said about an answer, in the card, in the colour of what happened.
  function settle(card, ok, decision, message, final) {
    const id = card.dataset.askId;
    busy.delete(id);
    card.querySelector(".result").textContent = message;
    card.classList.remove("allowed", "denied", "refused");
    if (ok) card.classList.add(decision === "deny" ? "denied" : "allowed");
    else card.classList.add("refused");
    if (final) kept.add(id);
  }

  async function answer(event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.closest("article.ask")) return;
    event.preventDefault();
    const card = form.closest("article.ask");
    const body = new URLSearchParams(new FormData(form, event.submitter));
    busy.add(card.dataset.askId);
    syncControls();
    const reply = await ask("/answer", { method: "POST", body,
                                         headers: auth({ Accept: "application/json" }) });
    const code = reply ? reply.status : 0;
    const message = (reply && reply.message) || "The answer could not be sent; try again.";
    // Answered, or no longer answerable: the card keeps the outcome.
    settle(card, code === 200, body.get("decision"), message,
           code === 200 || code === 409 || code === 404);
    arrange();
  }

  // A group's answer: the asks of this group on this page, each as shown, and no other.
  async function answerGroup(section, decision) {
    const members = Array.from(section.querySelectorAll("article.ask")).filter(answerable);
    if (members.length === 0 || outage !== null) return;
    const body = new URLSearchParams({ decision });
    const by = grouping();
    if (by) body.set(by, section.dataset.key);
    for (const card of members) {
      const form = card.querySelector("form");
      const scope = form.querySelector("input[name=scope]:checked");
      body.append("ask_id", card.dataset.askId);
      body.append("seen", form.elements.seen.value);
      body.append("scope", scope ? scope.value : "");
      busy.add(card.dataset.askId);
    }
    syncControls();
    const reply = await ask("/answer-group", { method: "POST", body,
                                               headers: auth({ Accept: "application/json" }) });
    const results = new Map(((reply && reply.results) || []).map((r) => [r.ask_id, r]));
    for (const card of members) {
      const result = results.get(card.dataset.askId);
      if (result) {
        settle(card, result.ok, decision, result.message,
               result.ok || result.status === 409 || result.status === 404);
      } else {
        settle(card, false, decision,
               (reply && reply.message) || "The answer could not be sent; try again.", false);
      }
    }
    if (reply && reply.message) status.textContent = reply.message;
    arrange();
  }

  // How long each ask can still be answered; past it, it can no longer be.
  function countdown() {
    const now = Date.now() / 1000;
    let ended = false;
    for (const clock of list.querySelectorAll(".expires[data-expires]")) {
      const left = Number(clock.dataset.expires) - now;
      clock.textContent = left > 0 ? `expires in ${span(left)}` : "expired";
      const card = clock.closest("article.ask");
      if (left <= 0 && !card.classList.contains("expired")) {
        card.classList.add("expired");
        ended = true;
      }
    }
    if (ended) syncControls();
  }

  function span(seconds) {
    const whole = Math.floor(seconds);
    const hours = Math.floor(whole / 3600);
    const minutes = Math.floor((whole % 3600) / 60);
    const secs = whole % 60;
    const two = (n) => String(n).padStart(2, "0");
    if (hours) return `${hours} h ${two(minutes)} min`;
    if (minutes) return `${minutes} min ${two(secs)} s`;
    return `${secs} s`;
  }

  // The inbox's events: what changed, an outage and its end. Read with fetch (an
  // EventSource cannot send the bearer header); reconnects, and reloads the view each time.
  async function listen() {
    let wait = 500;
    while (!stopped) {
      try {
        const response = await fetch("/events", {
          cache: "no-store", credentials: "omit",
          headers: auth({ Accept: "text/event-stream" }),
        });
        if (response.status === 401) {
          const reply = await response.json().catch(() => ({}));
          signedOut(reply.message || "Signed out: open your link again.");
          return;
        }
        if (response.ok) {
          wait = 500;
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += value;
            let end;
            while ((end = buffer.indexOf("\\n\\n")) >= 0) {
              await dispatch(buffer.slice(0, end));
              buffer = buffer.slice(end + 2);
            }
          }
        }
      } catch (error) {
        // The inbox went away or restarted: say so, and try again.
      }
      if (stopped) return;
      // No events yet: the view is read once anyway (a hello reads it again).
      if (!loaded) await load();
      if (stopped) return;
      if (loaded) status.textContent = "Not live: the inbox's events stopped; trying again.";
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 5000);
    }
  }

  async function dispatch(block) {
    let name = "message";
    let data = "";
    for (const line of block.split("\\n")) {
      if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (!data) return;
    const event = JSON.parse(data);
    if (name === "hello") {
      // (Re)connected: whatever happened meanwhile, the view is read again.
      signedIn(event.user);
      setOutage(event.outage);
      await load();
    } else if (name === "change") {
      await update(event);
    } else if (name === "outage") {
      setOutage(event.message);
    } else if (name === "restored") {
      setOutage(null);
      await load();
    }
  }

  function changed() {
    offset = 0;
    const q = query();
    history.replaceState(null, "", window.location.pathname + (q.size ? `?${q}` : ""));
    load();
  }

  async function signOut() {
    try {
      await fetch("/logout", { method: "POST", credentials: "omit", headers: auth() });
    } finally {
      signedOut("Signed out. Restart clearance inbox for a new link.");
    }
  }

  if (!token) {
    signedOut("Not signed in");
    return;
  }
  if (wanted.has("group")) filters.elements.group.value = wanted.get("group");
  list.addEventListener("submit", answer);
  filters.addEventListener("change", changed);
  filters.addEventListener("submit", (event) => event.preventDefault());
  $("prev").addEventListener("click", () => { offset = Math.max(0, offset - limit); load(); });
  $("next").addEventListener("click", () => { offset += limit; load(); });
  $("signout").addEventListener("click", signOut);
  setInterval(countdown, 1000);
  listen();
})();
"""

INBOX_CSS = """\
:root { color-scheme: light dark; --line: #8884; --muted: #777; --deny: #b3261e;
        --allow: #1b6e3a; --warn: #8a5300; --card: #fff; --bg: #f4f4f2; }
@media (prefers-color-scheme: dark) {
  :root { --card: #1e1f22; --bg: #131416; --deny: #f2726a; --allow: #5fc48a; --warn: #e0a040; }
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; background: var(--bg); }
header.top { display: flex; gap: 1em; align-items: baseline; flex-wrap: wrap;
             padding: .8em 1.5em; border-bottom: 1px solid var(--line); background: var(--card); }
header.top h1 { font-size: 1.15em; margin: 0; }
header.top .store { color: var(--muted); font-family: ui-monospace, monospace; font-size: .85em; }
header.top .user { margin-left: auto; }
.outage { background: var(--deny); color: #fff; font-weight: 600; padding: .7em 1.5em; }
main { max-width: 72em; margin: 0 auto; padding: 1em 1.5em 3em; }
main.narrow { max-width: 34em; padding-top: 3em; }
.filters { display: flex; gap: 1em; flex-wrap: wrap; align-items: baseline; font-size: .9em; }
.filters select { font: inherit; max-width: 18em; }
.summary { color: var(--muted); }
#status { margin-left: 1em; font-size: .85em; }
.pager { display: flex; gap: 1em; align-items: baseline; color: var(--muted); }
section.group { border-left: 4px solid var(--line); padding-left: 1em; margin: 0 0 1.5em; }
section.group > header { display: flex; gap: 1em; align-items: baseline; flex-wrap: wrap;
                         margin-bottom: .6em; }
section.group > header h2 { font-size: 1em; margin: 0; }
section.group .field, section.group .size { color: var(--muted); font-weight: 400; }
.bulk { display: flex; gap: .5em; flex-wrap: wrap; }
article.ask { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
              padding: 1em 1.2em; margin: 0 0 1em; }
article.ask.allowed { border: 2px solid var(--allow); }
article.ask.denied { border: 2px solid var(--deny); }
article.ask.refused { border: 2px solid var(--warn); }
article.ask.host-gone, article.ask.expired { border-style: dashed; opacity: .8; }
.gone { font-weight: 600; color: var(--warn); margin: .8em 0 0; }
article.ask header { display: flex; gap: 1em; align-items: baseline; flex-wrap: wrap; }
article.ask h2 { font-size: 1.1em; margin: 0; font-family: ui-monospace, monospace; }
article.ask .who, article.ask .host, article.ask time, .ids { color: var(--muted); font-size: .85em; }
article.ask .expires { margin-left: auto; font-size: .85em; font-variant-numeric: tabular-nums; }
article.ask.expired .expires { color: var(--warn); font-weight: 600; }
.label { font-weight: 600; margin-right: .4em; }
.args { font-family: ui-monospace, monospace; font-size: .9em; border-left: 3px solid var(--line);
        padding: .2em .8em; margin: .6em 0; }
.arg { display: flex; gap: .8em; padding: .15em 0; }
.arg .name { flex: 0 0 9em; color: var(--muted); overflow-wrap: anywhere; }
.arg .value { white-space: pre-wrap; overflow-wrap: anywhere; min-width: 0; }
.arg.deciding .name { color: inherit; font-weight: 700; }
.arg.deciding .value { font-weight: 600; }
.note { margin: 0 0 .3em 9.8em; padding: .1em .4em; border-left: 3px solid #c60; color: #c60; overflow-wrap: anywhere; }
details summary { cursor: pointer; color: var(--muted); font-size: .9em; }
fieldset { border: 0; padding: 0; margin: .6em 0 0; }
fieldset.scopes label { display: block; padding: .1em 0; }
fieldset.scopes legend { color: var(--muted); font-size: .9em; padding: 0; }
.buttons { display: flex; gap: .6em; flex-wrap: wrap; margin-top: .6em; }
button { font: inherit; padding: .35em .9em; border-radius: 6px; border: 1px solid var(--line);
         background: transparent; cursor: pointer; }
button.deny { border-color: var(--deny); color: var(--deny); }
button.allow_once, button.allow_session, button.allow_always { border-color: var(--allow); color: var(--allow); }
button:disabled { opacity: .5; cursor: default; }
.result:empty { display: none; }
.result { margin: .8em 0 0; font-weight: 600; }
article.ask.allowed .result { color: var(--allow); }
article.ask.denied .result { color: var(--deny); }
article.ask.refused .result { color: var(--warn); }
code { font-family: ui-monospace, monospace; }
"""
