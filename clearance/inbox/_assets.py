"""The inbox page's script and style, served as files of the inbox (its Content Security
Policy allows no inline script or style).

The script keeps the page live without reloading it: every ``data-poll`` milliseconds it
fetches ``/asks`` (the server-rendered, escaped cards of the pending asks), adds the cards
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
  const list = document.getElementById("asks");
  const empty = document.getElementById("empty");
  const count = document.getElementById("count");
  const status = document.getElementById("status");
  const interval = Number(document.body.dataset.poll || "1000");
  // Asks answered (or refused) on this page: their cards stay, with what the inbox said.
  const kept = new Set();
  let stopped = false;

  const cards = () => Array.from(list.querySelectorAll("article.ask"));

  function show(fresh) {
    const pending = new Set(fresh.map((card) => card.dataset.askId));
    for (const card of cards()) {
      if (!pending.has(card.dataset.askId) && !kept.has(card.dataset.askId)) card.remove();
    }
    const shown = new Set(cards().map((card) => card.dataset.askId));
    for (const card of fresh) {
      if (!shown.has(card.dataset.askId)) list.append(document.adoptNode(card));
    }
    recount();
  }

  function recount() {
    const waiting = cards().filter((card) => !kept.has(card.dataset.askId)).length;
    count.textContent = `${waiting} ask${waiting === 1 ? "" : "s"} waiting`;
    empty.hidden = cards().length > 0;
  }

  async function refresh() {
    let response;
    try {
      response = await fetch("/asks", { cache: "no-store", credentials: "same-origin" });
    } catch (error) {
      status.textContent = "The inbox is not answering; trying again.";
      return;
    }
    if (response.status === 401) {
      stopped = true;
      status.textContent = "Signed out: open a new login link from clearance inbox.";
      return;
    }
    if (!response.ok) {
      status.textContent = `The inbox answered ${response.status}; trying again.`;
      return;
    }
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
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
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const reply = await response.json().catch(() => ({}));
      message = reply.message || `The inbox answered ${response.status}.`;
      ok = response.ok;
      // Answered, or no longer answerable: the card keeps the outcome.
      final = ok || response.status === 409 || response.status === 404;
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

  async function loop() {
    while (!stopped) {
      await refresh();
      await new Promise((resolve) => setTimeout(resolve, interval));
    }
  }

  list.addEventListener("submit", answer);
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
article.ask header { display: flex; gap: 1em; align-items: baseline; flex-wrap: wrap; }
article.ask h2 { font-size: 1.1em; margin: 0; font-family: ui-monospace, monospace; }
article.ask .who, article.ask time, .ids { color: var(--muted); font-size: .85em; }
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
