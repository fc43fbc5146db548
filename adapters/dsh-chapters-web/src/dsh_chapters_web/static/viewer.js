// The viewer's only script: scroll to a highlighted line, fold/unfold, open artifacts inline.
// Everything works without it (links navigate, <details> fold); it only saves clicks.
(function () {
  "use strict";
  function highlight() {
    var params = new URLSearchParams(window.location.search);
    var n = params.get("line");
    if (!n || !/^[0-9]+$/.test(n)) { return; }
    var el = document.getElementById("L" + n);
    if (!el) { return; }
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; }
    }
    el.classList.add("hit");
    el.scrollIntoView({ block: "center" });
    document.body.setAttribute("data-scrolled-to", n);
  }
  function folds() {
    document.querySelectorAll("button[data-fold]").forEach(function (button) {
      button.addEventListener("click", function () {
        var open = button.getAttribute("data-fold") === "open";
        document.querySelectorAll("details.block").forEach(function (d) {
          if (open) { d.open = true; }
          else if (!d.classList.contains("user") && !d.classList.contains("assistant")) { d.open = false; }
        });
      });
    });
  }
  function artifacts() {
    document.querySelectorAll("a.open-artifact").forEach(function (link) {
      link.addEventListener("click", function (event) {
        var body = link.closest("details").querySelector(".artifact-body");
        if (!body) { return; }
        event.preventDefault();
        fetch(link.getAttribute("href"), { headers: { "Accept": "application/json" } })
          .then(function (r) { return r.json().then(function (d) { return [r.ok, d]; }); })
          .then(function (pair) {
            var pre = document.createElement("pre");
            pre.className = "verbatim artifact-text";
            pre.textContent = pair[0] ? pair[1].text : (pair[1].error + "\nnext: " + pair[1].next);
            body.replaceChildren(pre);
          });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { highlight(); folds(); artifacts(); });
})();
