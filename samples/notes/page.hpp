#pragma once
// The notes sample's page (GET /): a live counter over the page's channel.
// It opens GET /_troupe/ws (the cookie of this page's own GET names the
// connection), opens its page's channel, and shows the counter that every
// change pushes to the user's pages ({"push": "/counter", "data": {"count": n}}),
// whether the change came over the channel (+1) or over HTTP (+1 over HTTP),
// from this tab or another. A closed socket is reopened after a pause; a call
// answered 409 (the channel was lost: the socket changed, or the user's binding
// was not kept — a freeze and a wake keep it, docs/channels.md) reopens the
// channel and is sent again. The data-testid attributes are what the browser test reads.

namespace notes_sample {

inline constexpr const char* page_html = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>troupe notes</title>
<style>
  body { font: 16px/1.4 system-ui, sans-serif; margin: 2rem auto; max-width: 32rem; color: #222; }
  output { display: block; font-size: 4rem; font-variant-numeric: tabular-nums; margin: 1rem 0; }
  button { font: inherit; padding: .4rem 1rem; margin-right: .5rem; }
  .status { font-size: .85rem; color: #666; }
  #log { font: 12px/1.3 ui-monospace, monospace; color: #555; white-space: pre-wrap; }
</style>
</head>
<body>
<h1>notes</h1>
<p class="status">channel: <span id="channel" data-testid="channel" data-value="connecting">connecting</span>
  · pushes: <span id="pushes" data-testid="pushes" data-value="0">0</span>
  · user: <span id="user" data-testid="user" data-value="">…</span></p>
<output id="counter" data-testid="counter" data-value="">…</output>
<button id="incr" data-testid="incr">+1</button>
<button id="incr-http" data-testid="incr-http">+1 over HTTP</button>
<div id="log"></div>
<script>
"use strict";
const page = sessionStorage.getItem("troupe-page") || ("p" + Math.random().toString(36).slice(2, 12));
sessionStorage.setItem("troupe-page", page);
const $ = (id) => document.getElementById(id);
const show = (id, value) => { const e = $(id); e.dataset.value = String(value); e.textContent = String(value); };
const log = (text) => { const l = $("log"); l.textContent = (text + "\n" + l.textContent).slice(0, 2000); };

let ws = null, nextId = 1, pushes = 0;
const waiting = new Map();  // call id -> its reply's handler

function send(path, data, method) {
  return new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ page, id, method: method || "POST", path, data: data === undefined ? null : data }));
  });
}

// A call refused 409 found the channel lost (docs/channels.md: a freeze and a
// wake keep it, a commander takeover does not): open it again and send the call once more.
async function call(path, data, method) {
  let r = await send(path, data, method);
  if (r.status === 409) {
    log("the channel was lost: reopening");
    await openChannel();
    r = await send(path, data, method);
  }
  return r;
}

async function openChannel() {
  const r = await send("/_troupe/openchannel", {});
  if (r.status !== 200) { log("openchannel: " + JSON.stringify(r)); return; }
  show("channel", "open");
  const me = await send("/api/whoami", null, "GET");
  if (me.status === 200) show("user", me.data.user);
  const c = await send("/api/counter", null, "GET");
  if (c.status === 200) show("counter", c.data.count);
}

function connect() {
  show("channel", "connecting");
  ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/_troupe/ws");
  ws.onopen = () => openChannel();
  ws.onmessage = (ev) => {
    const f = JSON.parse(ev.data);
    if (f.push !== undefined) {
      show("pushes", ++pushes);
      if (f.push === "/counter") show("counter", f.data.count);
      return;
    }
    const done = waiting.get(f.id);
    waiting.delete(f.id);
    if (done) done(f);
  };
  ws.onclose = (ev) => {
    show("channel", "closed");
    log("socket closed (" + ev.code + (ev.reason ? " " + ev.reason : "") + "): reconnecting");
    for (const done of waiting.values()) done({ status: 0 });
    waiting.clear();
    setTimeout(connect, 500);
  };
}

$("incr").onclick = async () => {
  const r = await call("/api/counter/incr");
  if (r.status !== 200) log("+1: " + JSON.stringify(r));
};
$("incr-http").onclick = async () => {
  const r = await fetch("/api/counter/incr", { method: "POST", headers: { "X-Troupe-Page": page } });
  if (!r.ok) log("+1 over HTTP: " + r.status);  // the counter itself arrives as a push
};
connect();
</script>
</body>
</html>
)html";

}  // namespace notes_sample
