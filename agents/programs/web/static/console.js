// Glue for the console pages (htmx does the rest): the live indicator, a refresh after the
// event stream reconnects (events missed while it was down), and a one-line flash for the
// answers of cancel and retry.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var opened = false;
  function setLive(on) { if (live) { live.dataset.live = on ? "on" : "off"; } }

  document.body.addEventListener("htmx:sseOpen", function () {
    setLive(true);
    if (opened) { htmx.trigger(document.body, "fd:refresh"); }
    opened = true;
  });
  document.body.addEventListener("htmx:sseError", function () { setLive(false); });

  var flash = document.getElementById("flash");
  var hideTimer = null;
  function say(text, bad) {
    if (!flash) { return; }
    flash.textContent = text;  // text, never markup
    flash.className = bad ? "bad" : "";
    flash.hidden = false;
    clearTimeout(hideTimer);
    hideTimer = setTimeout(function () { flash.hidden = true; }, 6000);
  }

  function message(xhr) {
    try {
      var body = JSON.parse(xhr.responseText);
      return body.message || body.detail || xhr.statusText;
    } catch (e) { return xhr.statusText || "request failed"; }
  }

  document.body.addEventListener("htmx:afterRequest", function (evt) {
    var elt = evt.detail.elt;
    var action = elt && elt.dataset ? elt.dataset.action : null;
    if (!action) { return; }
    var xhr = evt.detail.xhr;
    var id = elt.dataset.task;
    if (xhr.status >= 200 && xhr.status < 300) {
      var text = action === "cancel" ? "Task " + id + " cancelled." : "Task " + id + " retried.";
      try {
        var body = JSON.parse(xhr.responseText);
        if (action === "retry" && body.id && String(body.id) !== String(id)) {
          text = "Task " + id + " retried as task " + body.id + ".";
        }
      } catch (e) { /* the status is enough */ }
      say(text, false);
      htmx.trigger(document.body, "fd:refresh");
    } else if (xhr.status === 401) {
      window.location.href = "/login?next=" + encodeURIComponent(window.location.pathname);
    } else {
      say(message(xhr) || ("could not " + action + " task " + id), true);
    }
  });
  // A network failure (the console went away) is one line too.
  document.body.addEventListener("htmx:sendError", function () { say("The console did not answer.", true); });
})();
