// hpdparse review page: a box on the page image and its block in the text highlight each other
// (hover, focus or click); clicking one brings the other into view.
(function () {
  "use strict";
  var hovered = null;
  var selected = null;

  function refOf(node) {
    var element = node && node.closest ? node.closest("[data-ref]") : null;
    return element ? element.getAttribute("data-ref") : null;
  }

  function mark(ref, name, on) {
    if (!ref) {
      return;
    }
    ["x-", "b-"].forEach(function (prefix) {
      var element = document.getElementById(prefix + ref);
      if (element) {
        element.classList.toggle(name, on);
      }
    });
  }

  function select(ref, from) {
    mark(selected, "sel", false);
    selected = ref;
    mark(ref, "sel", true);
    var other = document.getElementById((from === "x-" ? "b-" : "x-") + ref);
    if (other) {
      other.scrollIntoView({ block: "nearest", inline: "nearest" });
    }
  }

  document.addEventListener("mouseover", function (event) {
    var ref = refOf(event.target);
    if (ref !== hovered) {
      mark(hovered, "hl", false);
      hovered = ref;
      mark(ref, "hl", true);
    }
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest("a, summary, input, label")) {
      return;
    }
    var element = event.target.closest("[data-ref]");
    if (element) {
      select(element.getAttribute("data-ref"), element.id.slice(0, 2));
    }
  });

  document.addEventListener("focusin", function (event) {
    var element = event.target.closest("article[data-ref]");
    if (element) {
      select(element.getAttribute("data-ref"), "b-");
    }
  });

  var toggle = document.getElementById("show-boxes");
  if (toggle) {
    toggle.addEventListener("change", function () {
      document.body.classList.toggle("no-boxes", !toggle.checked);
    });
  }
  var byConfidence = document.getElementById("by-confidence");
  if (byConfidence) {
    byConfidence.addEventListener("change", function () {
      document.body.classList.toggle("by-confidence", byConfidence.checked);
    });
  }
})();
