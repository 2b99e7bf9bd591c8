// Follows a live run: polls the events endpoint with where the turn under way begins (`after`) and the bytes
// seen (`size`); an answer that has news appends the turns finished since and replaces the turn under way and
// the figures, so each poll carries only what is new. The HTML comes sanitized from the server
// (bot/server/render.py); no inline script is ever needed.
(function () {
  "use strict";
  var root = document.getElementById("transcript");
  if (!root || root.dataset.live !== "true") return;
  var head = document.getElementById("transcript-head");
  var done = document.getElementById("transcript-done");
  var open = document.getElementById("transcript-open");
  var state = document.getElementById("run-state");
  var note = document.getElementById("live-note");
  var after = root.dataset.after;
  var size = root.dataset.size;
  var every = 1000;

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  }

  function poll() {
    var url = root.dataset.events + "&after=" + encodeURIComponent(after) + "&size=" + encodeURIComponent(size);
    fetch(url, { cache: "no-store", credentials: "same-origin" })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (data) {
        if (!data) { setTimeout(poll, every * 5); return; }
        if (typeof data.open === "string") {
          var follow = atBottom();
          head.innerHTML = data.head;
          if (data.done) { done.insertAdjacentHTML("beforeend", data.done); }
          open.innerHTML = data.open;
          after = String(data.after);
          if (follow) window.scrollTo(0, document.body.scrollHeight);
        }
        size = String(data.size);
        if (state) { state.textContent = data.state; state.className = "badge " + data.state; }
        if (data.live) { setTimeout(poll, every); } else if (note) { note.textContent = ""; }
      })
      .catch(function () { setTimeout(poll, every * 5); });
  }
  setTimeout(poll, every);
})();
