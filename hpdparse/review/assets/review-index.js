// hpdparse review index: a click on a column header sorts its table by that column (ascending
// first, a second click descending); rows without a value stay last either way. Each table
// row group is a <tbody> carrying its sort values as data- attributes.
(function () {
  "use strict";

  function value(group, key, type) {
    var raw = group.getAttribute("data-" + key);
    if (raw === null || raw === "") {
      return null;
    }
    return type === "text" ? raw : parseFloat(raw);
  }

  function sortBy(table, header) {
    var key = header.getAttribute("data-key");
    var type = header.getAttribute("data-type");
    var ascending = header.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th[data-key]").forEach(function (other) {
      other.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var groups = Array.prototype.map.call(table.tBodies, function (group, place) {
      return { group: group, value: value(group, key, type), place: place };
    });
    groups.sort(function (a, b) {
      if (a.value === null || b.value === null) {
        return a.value === b.value ? a.place - b.place : a.value === null ? 1 : -1;
      }
      var order = type === "text" ? a.value.localeCompare(b.value) : a.value - b.value;
      return (ascending ? order : -order) || a.place - b.place;
    });
    groups.forEach(function (item) {
      table.appendChild(item.group);
    });
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th[data-key] button").forEach(function (button) {
      button.addEventListener("click", function () {
        sortBy(table, button.closest("th"));
      });
    });
  });
})();
