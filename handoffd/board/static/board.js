// The open page keeps itself current: every second it asks for its live part again
// (with the ETag of the copy it shows, so an unchanged board costs a 304) and swaps it
// in when it changed.  The server escapes everything; nothing here builds HTML.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var etag = live.getAttribute("data-etag") || "";
  var EVERY_MS = 1000;

  function retitle() {
    var head = live.querySelector("[data-title]");
    if (head) { document.title = head.getAttribute("data-title"); }
  }

  function tick() {
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch("/fragment", { headers: headers, cache: "no-store" })
      .then(function (response) {
        document.body.classList.remove("offline");
        if (response.status !== 200) { return null; }
        etag = response.headers.get("ETag") || "";
        return response.text();
      })
      .then(function (html) {
        if (html !== null) { live.innerHTML = html; retitle(); }
      })
      .catch(function () { document.body.classList.add("offline"); })
      .then(function () { window.setTimeout(tick, EVERY_MS); });
  }

  retitle();
  window.setTimeout(tick, EVERY_MS);
})();
