// Follows a live run: polls the events endpoint and swaps in the re-rendered transcript when it grew.
// The HTML comes sanitized from the server (bot/server/render.py); no inline script is ever needed.
(function () {
  "use strict";
  var root = document.getElementById("transcript");
  if (!root || root.dataset.live !== "true") return;
  var state = document.getElementById("run-state");
  var note = document.getElementById("live-note");
  var after = root.dataset.after;
  var every = 1000;

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  }

  function poll() {
    var url = root.dataset.events + "&after=" + encodeURIComponent(after);
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (data) {
        if (!data) { setTimeout(poll, every * 5); return; }
        if (typeof data.html === "string") {
          var follow = atBottom();
          root.innerHTML = data.html;
          if (follow) window.scrollTo(0, document.body.scrollHeight);
        }
        after = String(data.after);
        if (state) { state.textContent = data.state; state.className = "badge " + data.state; }
        if (data.live) { setTimeout(poll, every); } else if (note) { note.textContent = ""; }
      })
      .catch(function () { setTimeout(poll, every * 5); });
  }
  setTimeout(poll, every);
})();
