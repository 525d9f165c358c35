// The open page keeps itself current: every second it asks for its live part again
// (with the ETag of the copy it shows, so an unchanged board costs a 304) and swaps it
// in when it changed.  The server escapes everything; nothing here builds HTML.
//
// With the board's key the cards carry forms (an operator's actions).  On the open page a
// form is sent in the background, so the page stays live and shows the change within a
// second; a refusal is shown under the form as the command's own words.  The live part is
// not swapped while someone types into one of its forms.  A new red card, or a new card
// for the operator ("For you"), raises a browser notification when the operator allowed them.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var etag = live.getAttribute("data-etag") || "";
  var EVERY_MS = 1000;
  var reds = null;  // the red cards last shown; null until the first look

  function retitle() {
    var head = live.querySelector("[data-title]");
    if (head) { document.title = head.getAttribute("data-title"); }
  }

  function redCards() {
    var found = {};
    // red cards, and what agents handed to the operator ("For you"): both need a person
    live.querySelectorAll('[data-card][data-color="red"], [data-for-you] [data-card]').forEach(function (card) {
      found[card.getAttribute("data-card")] = true;
    });
    return found;
  }

  function notifyNewReds() {
    var now = redCards();
    if (reds !== null && window.Notification && Notification.permission === "granted") {
      Object.keys(now).forEach(function (card) {
        if (!reds[card]) { new Notification("handoffd: a card needs you", { body: card }); }
      });
    }
    reds = now;
  }

  function typing() {
    var active = document.activeElement;
    if (active && live.contains(active) && active.form) { return true; }
    return Array.prototype.some.call(live.querySelectorAll("textarea, input[type=text]"),
      function (field) { return field.value !== ""; });
  }

  function tick() {
    var headers = etag ? { "If-None-Match": etag } : {};
    if (typing()) { window.setTimeout(tick, EVERY_MS); return; }
    fetch("/fragment", { headers: headers, cache: "no-store" })
      .then(function (response) {
        document.body.classList.remove("offline");
        if (response.status !== 200) { return null; }
        etag = response.headers.get("ETag") || "";
        return response.text();
      })
      .then(function (html) {
        if (html !== null && !typing()) { live.innerHTML = html; retitle(); notifyNewReds(); }
      })
      .catch(function () { document.body.classList.add("offline"); })
      .then(function () { window.setTimeout(tick, EVERY_MS); });
  }

  function refuse(form, message) {
    var shown = form.parentNode.querySelector(".refusal");
    if (shown) { shown.textContent = message; shown.hidden = false; }
  }

  // What a done action says ("Answered <card>"): above the live part, which is swapped
  // within a second, so the line stays until the next action.
  function showDone(message) {
    var done = document.getElementById("done");
    if (done) { done.textContent = message; done.hidden = false; }
  }

  live.addEventListener("submit", function (event) {
    var form = event.target;
    event.preventDefault();
    var body = new URLSearchParams(new FormData(form));
    fetch(form.getAttribute("action"), {
      method: "POST", body: body, headers: { "Accept": "text/plain" }, cache: "no-store",
    }).then(function (response) {
      if (response.ok) {
        form.reset();
        if (document.activeElement) { document.activeElement.blur(); }
        etag = "";  // look again now
        return response.text().then(function (text) { showDone(text.trim()); });
      }
      return response.text().then(function (text) { refuse(form, text.trim()); });
    }).catch(function () { refuse(form, "The board cannot be reached."); });
  });

  var ask = document.getElementById("notify");
  if (ask && window.Notification && Notification.permission === "default") {
    ask.hidden = false;
    ask.addEventListener("click", function () {
      Notification.requestPermission().then(function () { ask.hidden = true; });
    });
  }

  retitle();
  notifyNewReds();
  window.setTimeout(tick, EVERY_MS);
})();
