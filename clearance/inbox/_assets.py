"""The inbox page's script and style, served as files of the inbox (its Content Security
Policy allows no inline script or style).

The script signs the page in: it takes the person's token from the link's fragment
(``#token=...``), keeps it in the tab's ``sessionStorage`` only, takes it out of the
address bar, and sends it as ``Authorization: Bearer`` with every request (never a
cookie: see :mod:`clearance.inbox._auth`). It keeps the page live without reloading it:
every ``data-poll`` milliseconds it fetches ``/asks`` (who is signed in, and the
server-rendered, escaped cards of the pending asks), adds the cards
of new asks and removes those no longer pending, leaving every other card as it is (a
person's scope choice is not reset under their cursor). It sends an answer with ``fetch``
and writes the inbox's reply into the card with ``textContent``. It never builds HTML
from data: the cards come from the server, parsed by ``DOMParser`` (which runs no script).
"""

from __future__ import annotations

__all__ = ["INBOX_CSS", "INBOX_JS"]

INBOX_JS = """\
"use strict";
(() => {
  const KEY = "clearance-inbox-token";
  const list = document.getElementById("asks");
  const empty = document.getElementById("empty");
  const count = document.getElementById("count");
  const status = document.getElementById("status");
  const signin = document.getElementById("signin");
  const interval = Number(document.body.dataset.poll || "1000");
  // Asks answered (or refused) on this page: their cards stay, with what the inbox said.
  const kept = new Set();
  let stopped = false;

  // The person's token: in the link's fragment (never sent to a server), then only in this
  // tab's sessionStorage (this origin's alone) and sent as a bearer header, never a cookie.
  const found = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
  if (found) {
    sessionStorage.setItem(KEY, decodeURIComponent(found[1]));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  const token = sessionStorage.getItem(KEY);

  function auth(extra) {
    return Object.assign({ Authorization: `Bearer ${token}` }, extra || {});
  }

  function signedOut(message) {
    stopped = true;
    sessionStorage.removeItem(KEY);
    document.getElementById("user").hidden = true;
    document.getElementById("signout").hidden = true;
    signin.hidden = false;
    status.textContent = message;
  }

  const cards = () => Array.from(list.querySelectorAll("article.ask"));

  function show(fresh) {
    const pending = new Set(fresh.map((card) => card.dataset.askId));
    for (const card of cards()) {
      if (!pending.has(card.dataset.askId) && !kept.has(card.dataset.askId)) card.remove();
    }
    const shown = new Map(cards().map((card) => [card.dataset.askId, card]));
    for (const card of fresh) {
      const old = shown.get(card.dataset.askId);
      if (old === undefined) list.append(document.adoptNode(card));
      else if (card.classList.contains("host-gone") && !old.classList.contains("host-gone")
               && !kept.has(card.dataset.askId)) {
        // Its host died while it was shown: the card loses its answer form.
        old.replaceWith(document.adoptNode(card));
      }
    }
    recount();
  }

  function recount() {
    const waiting = cards().filter(
      (card) => !kept.has(card.dataset.askId) && !card.classList.contains("host-gone")).length;
    count.textContent = `${waiting} ask${waiting === 1 ? "" : "s"} waiting`;
    empty.hidden = cards().length > 0;
  }

  async function refresh() {
    let response;
    try {
      response = await fetch("/asks", {
        cache: "no-store",
        credentials: "omit",
        headers: auth({ Accept: "application/json" }),
      });
    } catch (error) {
      status.textContent = "The inbox is not answering; trying again.";
      return;
    }
    const reply = await response.json().catch(() => ({}));
    if (response.status === 401) {
      signedOut(reply.message || "Signed out: open your link from clearance inbox.");
      return;
    }
    if (!response.ok) {
      status.textContent = reply.message || `The inbox answered ${response.status}; trying again.`;
      return;
    }
    document.getElementById("who").textContent = reply.user;
    document.getElementById("user").hidden = false;
    document.getElementById("signout").hidden = false;
    const doc = new DOMParser().parseFromString(reply.cards, "text/html");
    show(Array.from(doc.querySelectorAll("article.ask")));
    status.textContent = `Live, updated ${new Date().toLocaleTimeString()}`;
  }

  async function answer(event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.closest("article.ask")) return;
    event.preventDefault();
    const card = form.closest("article.ask");
    const result = card.querySelector(".result");
    const controls = form.querySelector("fieldset.controls");
    const body = new URLSearchParams(new FormData(form, event.submitter));
    controls.disabled = true;
    let message;
    let ok = false;
    let final = false;
    try {
      const response = await fetch("/answer", {
        method: "POST",
        body,
        credentials: "omit",
        headers: auth({ Accept: "application/json" }),
      });
      const reply = await response.json().catch(() => ({}));
      message = reply.message || `The inbox answered ${response.status}.`;
      ok = response.ok;
      // Answered, or no longer answerable: the card keeps the outcome.
      final = ok || response.status === 409 || response.status === 404;
      if (response.status === 401) signedOut(message);
    } catch (error) {
      message = "The answer could not be sent; try again.";
    }
    result.textContent = message;
    card.classList.toggle("answered", ok);
    card.classList.toggle("refused", !ok);
    if (final) {
      kept.add(card.dataset.askId);
    } else {
      controls.disabled = false;
    }
    recount();
  }

  async function signOut() {
    try {
      await fetch("/logout", { method: "POST", credentials: "omit", headers: auth() });
    } finally {
      signedOut("Signed out. Restart clearance inbox for a new link.");
    }
  }

  async function loop() {
    while (!stopped) {
      await refresh();
      await new Promise((resolve) => setTimeout(resolve, interval));
    }
  }

  if (!token) {
    signedOut("Not signed in");
    return;
  }
  list.addEventListener("submit", answer);
  document.getElementById("signout").addEventListener("click", signOut);
  loop();
})();
"""

INBOX_CSS = """\
:root { color-scheme: light dark; --line: #8884; --muted: #777; --deny: #b3261e;
        --allow: #1b6e3a; --card: #fff; --bg: #f4f4f2; }
@media (prefers-color-scheme: dark) { :root { --card: #1e1f22; --bg: #131416; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; background: var(--bg); }
header.top { display: flex; gap: 1em; align-items: baseline; flex-wrap: wrap;
             padding: .8em 1.5em; border-bottom: 1px solid var(--line); background: var(--card); }
header.top h1 { font-size: 1.15em; margin: 0; }
header.top .store { color: var(--muted); font-family: ui-monospace, monospace; font-size: .85em; }
header.top .user { margin-left: auto; }
form.logout { display: inline; }
main { max-width: 72em; margin: 0 auto; padding: 1em 1.5em 3em; }
main.narrow { max-width: 34em; padding-top: 3em; }
.summary { color: var(--muted); }
#status { margin-left: 1em; font-size: .85em; }
article.ask { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
              padding: 1em 1.2em; margin: 0 0 1em; }
article.ask.answered { border-color: var(--allow); }
article.ask.refused { border-color: var(--deny); }
article.ask.host-gone { border-style: dashed; opacity: .8; }
.gone { font-weight: 600; color: var(--deny); margin: .8em 0 0; }
article.ask header { display: flex; gap: 1em; align-items: baseline; flex-wrap: wrap; }
article.ask h2 { font-size: 1.1em; margin: 0; font-family: ui-monospace, monospace; }
article.ask .who, article.ask .host, article.ask time, .ids { color: var(--muted); font-size: .85em; }
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
button.allow_once, button.allow_session, button.allow_always { border-color: var(--allow); }
button:disabled { opacity: .5; cursor: default; }
.result:empty { display: none; }
.result { margin: .8em 0 0; font-weight: 600; }
article.ask.answered .result { color: var(--allow); }
article.ask.refused .result { color: var(--deny); }
code { font-family: ui-monospace, monospace; }
"""
