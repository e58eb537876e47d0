// The caller page: join the LiveKit room as the caller, show the transcript (the agent's
// lk.transcription text streams) and the caller's task cards (frontdesk.task RPC updates,
// plus frontdesk.tasks once the agent is there). Payloads: docs/deploy.md. Everything shown
// is set as text, never as markup.
(function () {
  "use strict";
  var LK = window.LivekitClient;
  var form = document.getElementById("join");
  var hangup = document.getElementById("hangup");
  var state = document.getElementById("call-state");
  var transcript = document.getElementById("transcript");
  var cardsBox = document.getElementById("cards");
  var room = null;
  var agentIdentity = null;
  var cards = new Map();     // task_id -> what we know of the task
  var segments = new Map();  // transcript segment id -> its <li>

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function setState(text) { state.textContent = text; }

  // -- task cards ---------------------------------------------------------------------------
  function upsert(update) {
    var id = update.task_id;
    if (typeof id !== "number") { return; }
    var card = cards.get(id) || { task_id: id };
    ["tool", "department", "pattern", "status", "progress", "error", "result"].forEach(function (k) {
      if (update[k] !== undefined) { card[k] = update[k]; }
    });
    if (update.note !== undefined) { card.note = update.note; }
    if (update.progress_note) { card.note = update.progress_note; }
    card.at = update.at || update.finished_at || update.created_at || card.at;
    cards.set(id, card);
    drawCards();
  }

  function drawCards() {
    cardsBox.replaceChildren();
    if (cards.size === 0) { cardsBox.appendChild(el("p", "none", "Nothing yet.")); return; }
    Array.from(cards.values()).sort(function (a, b) { return b.task_id - a.task_id; }).forEach(function (c) {
      var box = el("article", "card");
      box.id = "card-" + c.task_id;
      box.dataset.status = c.status || "";
      var head = el("header");
      head.appendChild(el("strong", null, c.tool || "task"));
      head.appendChild(el("span", "status s-" + (c.status || ""), c.status || ""));
      box.appendChild(head);
      box.appendChild(el("div", "meta", "#" + c.task_id + " · " + (c.department || "") + " · " + (c.pattern || "")));
      if (typeof c.progress === "number") {
        var bar = el("progress");
        bar.max = 1; bar.value = c.progress;
        box.appendChild(bar);
      }
      if (c.note) { box.appendChild(el("div", "note", c.note)); }
      if (c.error && c.status === "failed") { box.appendChild(el("div", "error", c.error)); }
      if (c.pattern === "background" && (c.status === "queued" || c.status === "running") && agentIdentity) {
        var btn = el("button", "act cancel", "Cancel");
        btn.type = "button";
        btn.addEventListener("click", function () { cancel(c); });
        box.appendChild(btn);
      }
      cardsBox.appendChild(box);
    });
  }

  function rpc(method, payload) {
    return room.localParticipant.performRpc({
      destinationIdentity: agentIdentity, method: method, payload: JSON.stringify(payload || {}),
    }).then(function (text) { return JSON.parse(text); });
  }

  function cancel(card) {
    if (!window.confirm("Cancel " + (card.tool || "task") + " #" + card.task_id + "?")) { return; }
    rpc("frontdesk.cancel", { task_id: card.task_id })
      .then(function (answer) { upsert({ task_id: answer.task_id, status: answer.status }); })
      .catch(function (err) { setState("could not cancel: " + (err && err.message ? err.message : err)); });
  }

  function foundAgent(participant) {
    if (!participant || !participant.isAgent || agentIdentity) { return; }
    agentIdentity = participant.identity;
    setState("connected; the front desk is here");
    rpc("frontdesk.tasks", {}).then(function (answer) {
      (answer.tasks || []).slice().reverse().forEach(upsert);
    }).catch(function () { /* updates still arrive over frontdesk.task */ });
  }

  // -- transcript ---------------------------------------------------------------------------
  function onTranscription(reader, from) {
    var info = reader.info || {};
    var attrs = info.attributes || {};
    var id = attrs["lk.segment_id"] || info.id;
    var mine = room && from && from.identity === room.localParticipant.identity;
    var li = segments.get(id);
    if (!li) {
      li = el("li", mine ? "you" : "agent");
      li.appendChild(el("span", "who", mine ? "You" : "Front desk"));
      li.appendChild(el("span", "text"));
      segments.set(id, li);
      transcript.appendChild(li);
    }
    li.classList.add("interim");
    var text = "";  // each stream carries its segment's whole text so far (or its deltas)
    (async function () {
      for await (var chunk of reader) {
        text += chunk;
        li.querySelector(".text").textContent = text;
      }
      li.classList.remove("interim");
    })().catch(function () { li.classList.remove("interim"); });
  }

  // -- joining ------------------------------------------------------------------------------
  // The server picks the room and who we are; the page asks for nothing but a token.
  async function join() {
    setState("asking for a token…");
    var res = await fetch("/call/token", { method: "POST", credentials: "same-origin" });
    if (!res.ok) {
      var why = res.status === 404 ? "calling is not set up here" : "the console refused: " + res.status;
      if (res.status === 429) { why = "too many calls from here just now; try again in a minute"; }
      if (res.status === 401) { why = "this page needs its access code: reload it"; }
      throw new Error(why);
    }
    var grant = await res.json();
    room = new LK.Room({ adaptiveStream: true, dynacast: true });
    room.registerRpcMethod("frontdesk.task", async function (data) {
      try { upsert(JSON.parse(data.payload)); } catch (e) { /* a malformed update is skipped */ }
      return "ok";
    });
    room.registerTextStreamHandler("lk.transcription", onTranscription);
    room.on(LK.RoomEvent.ParticipantConnected, foundAgent);
    room.on(LK.RoomEvent.TrackSubscribed, function (track) {
      if (track.kind === "audio") { document.body.appendChild(track.attach()); }
    });
    room.on(LK.RoomEvent.Disconnected, function () {
      setState("call ended");
      hangup.hidden = true;
      form.querySelector("button[type=submit]").disabled = false;
    });
    setState("joining " + grant.room + "…");
    await room.connect(grant.url, grant.token);
    setState("connected; waiting for the front desk");
    room.remoteParticipants.forEach(foundAgent);
    try { await room.localParticipant.setMicrophoneEnabled(true); }
    catch (e) { setState(state.textContent + " (no microphone: listening only)"); }
    hangup.hidden = false;
  }

  form.addEventListener("submit", function (evt) {
    evt.preventDefault();
    var button = form.querySelector("button[type=submit]");
    button.disabled = true;
    join().catch(function (err) {
      setState(err && err.message ? err.message : String(err));
      button.disabled = false;
    });
  });
  hangup.addEventListener("click", function () { if (room) { room.disconnect(); } });
})();
